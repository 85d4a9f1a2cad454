//! Hostile command lines and hostile recipe text at the CLI edge: NAME arguments cannot
//! reach outside the state directory, file names that give no deployment name are
//! refused, control characters never reach the terminal raw, `--quiet` means quiet.

use std::path::Path;
use std::process::{Command, Output};

fn srt(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_srt"))
        .current_dir(dir)
        .env_remove("SRT_CLUSTER")
        .args(args)
        .output()
        .unwrap()
}

const AGG: &str = "roles:\n  agg:\n    nodes: 1\n    workers: 1\n    gpus: 1\n";

#[test]
fn name_arguments_follow_the_recipe_name_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let victim = tmp.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("keep"), b"x").unwrap();
    let state_arg = state.to_str().unwrap();
    for args in [
        vec![
            "destroy",
            "../victim",
            "--state-dir",
            state_arg,
            "--auto-approve",
        ],
        vec!["destroy", "", "--state-dir", state_arg, "--auto-approve"],
        vec![
            "destroy",
            "/etc",
            "--state-dir",
            state_arg,
            "--auto-approve",
        ],
        vec!["status", "../victim", "--state-dir", state_arg],
        vec!["logs", "..", "router[0]", "--state-dir", state_arg],
        vec!["logs", "a/b", "router[0]", "--state-dir", state_arg],
    ] {
        let out = srt(tmp.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {stderr}");
        assert!(
            stderr.contains("is not a deployment name"),
            "{args:?}: {stderr}"
        );
    }
    // Nothing was created or locked anywhere.
    assert!(!state.exists(), "the state directory was created");
    let left: Vec<_> = std::fs::read_dir(&victim)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["keep"]);
}

#[test]
fn file_names_that_give_no_deployment_name_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for file in [
        "..yaml",
        "...yaml",
        " .yaml",
        "é-ü.yaml",
        "-x.yaml",
        "a b.yaml",
    ] {
        let path = tmp.path().join(file);
        std::fs::write(&path, AGG).unwrap();
        let out = srt(tmp.path(), &["validate", "-f", path.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{file}: {stderr}");
        assert!(stderr.contains("srt::recipe::name"), "{file}: {stderr}");
        assert!(stderr.contains("add `name:"), "{file}: {stderr}");
    }
    // A valid stem names the deployment; `name:` overrides it.
    let path = tmp.path().join("ok-1.yaml");
    std::fs::write(&path, AGG).unwrap();
    assert!(srt(tmp.path(), &["validate", "-f", "ok-1.yaml"])
        .status
        .success());
    let path = tmp.path().join("é.yaml");
    std::fs::write(&path, format!("name: named\n{AGG}")).unwrap();
    assert!(srt(tmp.path(), &["validate", "-f", "é.yaml"])
        .status
        .success());
}

#[test]
fn control_characters_never_reach_the_terminal_raw() {
    let tmp = tempfile::tempdir().unwrap();
    let recipe = "name: ctl\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n    gpus: 1\n    env:\n      TITLE: \"\\e]0;pwned\\a\\e[2J\\rgone\\x9b1m\"\n";
    std::fs::write(tmp.path().join("ctl.yaml"), recipe).unwrap();
    let state = tmp.path().join("state");
    for args in [
        vec!["render", "-f", "ctl.yaml"],
        vec!["graph", "-f", "ctl.yaml"],
        vec![
            "plan",
            "-f",
            "ctl.yaml",
            "--state-dir",
            state.to_str().unwrap(),
        ],
    ] {
        let out = srt(tmp.path(), &args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for raw in ['\u{1b}', '\u{7}', '\r', '\u{9b}'] {
            assert!(!text.contains(raw), "{args:?} printed {raw:?} raw:\n{text}");
        }
        if args[0] == "render" {
            assert!(text.contains("\\x1b]0;pwned\\x07"), "{args:?}:\n{text}");
        }
    }
    // JSON keeps the exact value (its encoder escapes it).
    let out = srt(tmp.path(), &["render", "-f", "ctl.yaml", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let env = &json["processes"][0]["env"]["TITLE"];
    assert_eq!(env, "\u{1b}]0;pwned\u{7}\u{1b}[2J\rgone\u{9b}1m");
}
