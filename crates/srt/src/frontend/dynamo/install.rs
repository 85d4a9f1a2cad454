//! `dynamo.install: true`: srtctl's install of an ai-dynamo release before each Dynamo
//! program starts (the frontend and every worker), in the environment of the Python
//! that runs it (its container's, where it has one).
//!
//! It is a setup script of srt's own, written into the run directory and hashed like a
//! recipe's `setup_script` (a changed release replaces the processes that install it).
//! Processes sharing an environment install one at a time (a lock file in it, as
//! srtctl serializes the ranks of a node); one that finds the release installed
//! installs nothing, so a restart does not reinstall and needs no network.

use crate::launch::wrap::Setup;
use crate::launch::{Argv, RUN_DIR};
use crate::recipe::{ArgValue, Recipe};
use std::sync::Arc;

use super::section::NAME;

/// The release srtctl installs when `dynamo.install` is true and no `version` is
/// named (its `DynamoConfig` default).
pub(super) const DEFAULT_RELEASE: &str = "0.8.0";

/// The recipe key the script stands for.
const KEY: &str = "dynamo.install";

/// The index pip also reads, as srtctl's install does (NVIDIA's development builds).
const EXTRA_INDEX: &str = "https://pypi.nvidia.com";

/// The ai-dynamo release the recipe installs, if it installs one: srtctl's `wheel` (an
/// exact release, installed unless `install: false`), else `version` (or srtctl's
/// default) when `install: true`.
pub(super) fn release(recipe: &Recipe) -> Option<String> {
    let section = recipe.sections.get(NAME)?;
    let install = section.get("install").map(|a| &a.value);
    if let Some(wheel) = section.get("wheel") {
        return (install != Some(&ArgValue::Bool(false))).then(|| wheel.value.render());
    }
    if install != Some(&ArgValue::Bool(true)) {
        return None;
    }
    Some(match section.get("version").map(|a| &a.value) {
        Some(ArgValue::Str(v)) => v.clone(),
        Some(other) => other.render(),
        None => DEFAULT_RELEASE.to_string(),
    })
}

/// The interpreter that runs the Dynamo module of `argv` (the word before
/// `-m dynamo.<module>`, after any launcher such as `trtllm-llmapi-launch`).
pub(super) fn interpreter(argv: &Argv) -> Option<&str> {
    let words: Vec<&str> = argv.iter().collect();
    words
        .windows(3)
        .find(|w| w[1] == "-m" && w[2].starts_with("dynamo."))
        .map(|w| w[0])
}

/// The setup script that installs `release` into `python`'s environment.
pub(super) fn setup(release: &str, python: &str) -> Setup {
    let text = script(release, python);
    let digest = crate::secrets::digest(&text);
    let short: String = digest
        .trim_start_matches("blake3:")
        .chars()
        .take(8)
        .collect();
    Setup {
        key: KEY,
        on_host: false,
        source: format!("ai-dynamo {release}"),
        path: format!("{RUN_DIR}/setup/dynamo-install-{short}.sh"),
        digest,
        text: Arc::from(text),
    }
}

/// The script's text.
fn script(release: &str, python: &str) -> String {
    let q = crate::launch::render::quote;
    format!(
        r#"#!/usr/bin/env bash
# Written by srt for `dynamo.install`: ai-dynamo {release} into the environment of
# {python}, which runs this process's Dynamo program. Processes sharing that
# environment install one at a time; one that finds the release there installs nothing.
set -euo pipefail
python={python_q}
release={release_q}
installed() {{
    "$python" - "$release" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    same = all(version(p) == sys.argv[1] for p in ("ai-dynamo", "ai-dynamo-runtime"))
except PackageNotFoundError:
    same = False
sys.exit(0 if same else 1)
PY
}}
prefix="$("$python" -c 'import sys; print(sys.prefix)')"
exec 9>>"$prefix/.srt-dynamo-install.lock"
flock -x 9
if installed; then
    echo "srt: ai-dynamo $release is installed in $prefix"
    exit 0
fi
echo "srt: installing ai-dynamo $release into $prefix"
PIP_BREAK_SYSTEM_PACKAGES=1 "$python" -m pip install --quiet --no-input \
    --extra-index-url {EXTRA_INDEX} \
    "ai-dynamo-runtime==$release" "ai-dynamo==$release"
if ! installed; then
    echo "srt: $python does not import ai-dynamo $release after the install" >&2
    exit 1
fi
echo "srt: ai-dynamo $release installed"
"#,
        python_q = q(python),
        release_q = q(release),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_interpreter_is_the_word_before_the_dynamo_module() {
        let argv = Argv::from(["python3", "-m", "dynamo.frontend", "--http-port", "1"]);
        assert_eq!(interpreter(&argv), Some("python3"));
        let launched = Argv::from([
            "numactl",
            "-m",
            "0,1",
            "trtllm-llmapi-launch",
            "/venv/bin/python",
            "-m",
            "dynamo.trtllm",
        ]);
        assert_eq!(interpreter(&launched), Some("/venv/bin/python"));
        assert_eq!(
            interpreter(&Argv::from(["python3", "-m", "sglang.launch_server"])),
            None
        );
    }

    #[test]
    fn the_script_is_named_by_its_contents_and_changes_with_the_release() {
        let a = setup("0.8.0", "python3");
        let b = setup("0.8.1", "python3");
        assert_eq!(a, setup("0.8.0", "python3"));
        assert_ne!(a.digest, b.digest);
        assert_ne!(a.path, b.path);
        assert!(
            a.path.starts_with("<run-dir>/setup/dynamo-install-"),
            "{}",
            a.path
        );
        assert_eq!(a.source, "ai-dynamo 0.8.0");
        assert!(!a.on_host);
    }

    /// A stand-in `python` that reports `installed` as ai-dynamo's version until pip
    /// runs, then the version pip was asked for; it records each pip call.
    fn fake_python(dir: &std::path::Path, installed: &str) -> std::path::PathBuf {
        let py = dir.join("python");
        let body = format!(
            r#"#!/usr/bin/env bash
d={dir}
if [ "$1" = -c ]; then echo "$d/prefix"; exit 0; fi
if [ "$1" = -m ] && [ "$2" = pip ]; then
  echo "$@" >> "$d/pip-calls"; echo "$PIP_BREAK_SYSTEM_PACKAGES" >> "$d/pip-calls"
  [ -e "$d/pip-installs-nothing" ] && exit 0
  for w in "$@"; do case "$w" in ai-dynamo==*) echo "${{w#ai-dynamo==}}" > "$d/version";; esac; done
  exit 0
fi
if [ "$1" = - ]; then
  cat > /dev/null
  [ "$(cat "$d/version" 2>/dev/null)" = "$2" ]; exit $?
fi
exit 2
"#,
            dir = dir.display()
        );
        std::fs::create_dir_all(dir.join("prefix")).unwrap();
        std::fs::write(&py, body).unwrap();
        std::fs::set_permissions(&py, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.join("version"), format!("{installed}\n")).unwrap();
        py
    }

    fn run(dir: &std::path::Path, release: &str, python: &std::path::Path) -> std::process::Output {
        let script = dir.join("install.sh");
        std::fs::write(
            &script,
            &*setup(release, &python.display().to_string()).text,
        )
        .unwrap();
        std::process::Command::new("bash")
            .arg(&script)
            .output()
            .unwrap()
    }

    #[test]
    fn an_installed_release_is_left_alone_and_another_is_installed_with_pip() {
        let dir = tempfile::tempdir().unwrap();
        let python = fake_python(dir.path(), "0.8.0");
        let out = run(dir.path(), "0.8.0", &python);
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("is installed"));
        assert!(!dir.path().join("pip-calls").exists(), "pip ran");
        assert!(dir.path().join("prefix/.srt-dynamo-install.lock").exists());

        let out = run(dir.path(), "1.6.1", &python);
        assert!(out.status.success(), "{out:?}");
        let calls = std::fs::read_to_string(dir.path().join("pip-calls")).unwrap();
        assert_eq!(
            calls,
            "-m pip install --quiet --no-input --extra-index-url https://pypi.nvidia.com \
             ai-dynamo-runtime==1.6.1 ai-dynamo==1.6.1\n1\n"
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("ai-dynamo 1.6.1 installed"));
    }

    #[test]
    fn an_install_that_leaves_another_release_fails_the_process() {
        let dir = tempfile::tempdir().unwrap();
        let python = fake_python(dir.path(), "0.8.0");
        std::fs::write(dir.path().join("pip-installs-nothing"), "").unwrap();
        let out = run(dir.path(), "0.9.0", &python);
        assert!(!out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("does not import ai-dynamo 0.9.0"));
    }
}
