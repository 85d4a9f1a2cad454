//! srtctl's v1 files: each fixture of `examples/srtctl-v1/` (agg, P/D, DEP, an override
//! file, a sweep) has its `srt migrate` text as a golden (`golden/srtctl/`), and the fixture and
//! that text give the same launch plan for every recipe the file holds.

mod common;

use srt::recipe::Source;
use srt::workflow::migrate::{verify, Outcome};

fn source(path: &std::path::Path) -> Source {
    Source {
        name: format!(
            "examples/srtctl-v1/{}",
            path.file_name().unwrap().to_string_lossy()
        ),
        text: std::fs::read_to_string(path).unwrap(),
    }
}

#[test]
fn migrated_forms_are_golden() {
    insta::glob!("../examples/srtctl-v1", "*.yaml", |path| {
        let original = source(path);
        let migrated = srt::recipe::srtctl::migrate_text(&original.text, &original.name)
            .unwrap_or_else(|p| panic!("{}: {p:?}", original.name));
        assert!(!migrated.notes.is_empty(), "{} is a v1 file", original.name);
        insta::with_settings!({
            snapshot_path => "../golden/srtctl",
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(migrated.text);
        });
    });
}

#[test]
fn every_fixture_and_its_migrated_form_give_the_same_launch_plan() {
    insta::glob!("../examples/srtctl-v1", "*.yaml", |path| {
        let original = source(path);
        let migrated = srt::recipe::srtctl::migrate_text(&original.text, &original.name).unwrap();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let checks = verify(&original, &migrated.text, &stem, &Default::default()).unwrap();
        assert!(!checks.is_empty());
        for check in checks {
            match check.outcome {
                Outcome::Same => {}
                other => panic!("{} {}: {other:?}", original.name, check.label),
            }
        }
    });
}

#[test]
fn a_migrated_form_loads_without_a_translation_note() {
    for name in [
        "agg-vllm.yaml",
        "disagg-sglang.yaml",
        "dep-sglang.yaml",
        "disagg-trtllm.yaml",
    ] {
        let path = common::root().join("examples/srtctl-v1").join(name);
        let original = source(&path);
        let migrated = srt::recipe::srtctl::migrate_text(&original.text, name).unwrap();
        let again = Source {
            name: name.into(),
            text: migrated.text,
        };
        let recipe = srt::recipe::load_str(&again, "m").unwrap();
        assert!(recipe.notes.is_empty(), "{name}: {:?}", recipe.notes);
        let recipe = srt::recipe::load_str(&original, "o").unwrap();
        assert!(
            recipe
                .notes
                .iter()
                .any(|n| n.code == "srt::recipe::srtctl_v1"),
            "{name}"
        );
    }
}
