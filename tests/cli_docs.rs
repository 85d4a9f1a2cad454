//! Generated files checked in for users stay fresh: the recipe JSON Schema, the man
//! page, and an example in every command's `--help`.

use clap::CommandFactory;

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn recipe_schema_is_fresh() {
    let on_disk = std::fs::read_to_string(root().join("docs/recipe.schema.json")).unwrap();
    assert!(
        on_disk == srt_cli::schema_text(),
        "docs/recipe.schema.json is stale: run `srt schema > docs/recipe.schema.json`"
    );
}

#[test]
fn man_page_is_fresh() {
    let on_disk = std::fs::read_to_string(root().join("docs/man/srt.1")).unwrap();
    assert!(
        on_disk == srt_cli::man_page(),
        "docs/man/srt.1 is stale: run `srt man > docs/man/srt.1`"
    );
}

#[test]
fn every_command_help_has_an_example() {
    let cmd = srt_cli::Cli::command();
    // Hidden commands are srt's own (`slurm-agent`, run by the allocation), not a user's.
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let after = sub
            .get_after_help()
            .map(std::string::ToString::to_string)
            .unwrap_or_default();
        assert!(
            after.contains("Example") && after.contains("srt "),
            "`srt {} --help` has no example",
            sub.get_name()
        );
    }
}

/// The schema's keys are exactly what the loader accepts: every example recipe uses only
/// keys the schema lists.
#[test]
fn examples_use_only_schema_keys() {
    let schema = srt::schema::json_schema();
    let top = schema["properties"].as_object().unwrap();
    for entry in std::fs::read_dir(root().join("examples"))
        .unwrap()
        .chain(std::fs::read_dir(root().join("examples/seed")).unwrap())
    {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            for line in text
                .lines()
                .filter(|l| !l.starts_with([' ', '#']) && l.contains(':'))
            {
                let key = line.split(':').next().unwrap();
                assert!(
                    top.contains_key(key),
                    "{}: `{key}` is not in the schema",
                    path.display()
                );
            }
        }
    }
}
