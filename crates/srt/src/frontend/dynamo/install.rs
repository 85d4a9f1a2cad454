//! `dynamo.install`: srtctl's install of ai-dynamo before each Dynamo program starts
//! (the frontend and every worker), in the environment of the Python that runs it (its
//! container's, where it has one): a release from the package indexes, or a build of
//! the commit `dynamo.hash` names.
//!
//! It is a setup script of srt's own, written into the run directory and hashed like a
//! recipe's `setup_script` (another release or commit replaces the processes that
//! install it). Processes sharing an environment install one at a time (a lock file in
//! it, as srtctl serializes the ranks of a node); one that finds it installed installs
//! nothing, so a restart does not reinstall and needs no network.

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

/// The repository a commit is built from, srtctl's.
const REPOSITORY: &str = "https://github.com/ai-dynamo/dynamo.git";

/// The ai-dynamo a recipe installs before each Dynamo program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Install {
    /// A release from the package indexes: `version` (or srtctl's default), or
    /// srtctl's `wheel`.
    Release(String),
    /// A build of the commit `dynamo.hash` names.
    Commit(String),
}

/// What the recipe installs, if anything: srtctl's `hash` (built) or `wheel` (an exact
/// release) unless `install: false`, else `version` (or srtctl's default) when
/// `install: true`.
pub(super) fn install(recipe: &Recipe) -> Option<Install> {
    let section = recipe.sections.get(NAME)?;
    let install = section.get("install").map(|a| &a.value);
    if install == Some(&ArgValue::Bool(false)) {
        return None;
    }
    if let Some(commit) = section.get("hash") {
        return Some(Install::Commit(commit.value.render()));
    }
    if let Some(wheel) = section.get("wheel") {
        return Some(Install::Release(wheel.value.render()));
    }
    if install != Some(&ArgValue::Bool(true)) {
        return None;
    }
    Some(Install::Release(
        match section.get("version").map(|a| &a.value) {
            Some(ArgValue::Str(v)) => v.clone(),
            Some(other) => other.render(),
            None => DEFAULT_RELEASE.to_string(),
        },
    ))
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

/// The setup script that installs `what` into `python`'s environment.
pub(super) fn setup(what: &Install, python: &str) -> Setup {
    let (text, source, stem) = match what {
        Install::Release(release) => (
            release_script(release, python),
            format!("ai-dynamo {release}"),
            "dynamo-install",
        ),
        Install::Commit(commit) => (
            commit_script(commit, python),
            format!("ai-dynamo at {commit}"),
            "dynamo-build",
        ),
    };
    let digest = crate::secrets::digest(&text);
    let short: String = digest
        .trim_start_matches("blake3:")
        .chars()
        .take(8)
        .collect();
    Setup {
        key: KEY,
        on_host: false,
        source,
        path: format!("{RUN_DIR}/setup/{stem}-{short}.sh"),
        digest,
        text: Arc::from(text),
    }
}

/// The text of the script that installs a release.
fn release_script(release: &str, python: &str) -> String {
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

/// The text of the script that builds and installs a commit, as srtctl's source
/// install does: ai-dynamo's repository cloned at the commit, its runtime wheel built
/// with maturin (the Rust toolchain, git and protoc fetched as srtctl fetches them when
/// the node lacks them), its Python package built as a wheel, both installed with pip.
/// The first process of the run builds into `dynamo-build/<commit>/` beside the script
/// (the run directory, which every node sees); the others wait on its lock and install
/// what it built. Unlike srtctl, the build does not tune for the building node's CPU
/// (`-C target-cpu=native`): nodes of other CPUs install the same wheel.
fn commit_script(commit: &str, python: &str) -> String {
    let q = crate::launch::render::quote;
    format!(
        r#"#!/usr/bin/env bash
# Written by srt for `dynamo.hash`: ai-dynamo built from commit {commit} of
# {REPOSITORY}, into the environment of {python}, which runs this process's Dynamo
# program. The first process of the run builds it beside this script; the others
# install what it built, one at a time per environment.
set -euo pipefail
python={python_q}
commit={commit_q}
cache="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)/dynamo-build/$commit"
# Whether both packages in the environment were installed from this commit's wheels
# (pip records the file it installed from).
installed() {{
    "$python" - "$commit" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, distribution
try:
    urls = [distribution(p).read_text("direct_url.json") or "" for p in ("ai-dynamo", "ai-dynamo-runtime")]
except PackageNotFoundError:
    sys.exit(1)
sys.exit(0 if all(f"/dynamo-build/{{sys.argv[1]}}/" in u for u in urls) else 1)
PY
}}
prefix="$("$python" -c 'import sys; print(sys.prefix)')"
exec 9>>"$prefix/.srt-dynamo-install.lock"
flock -x 9
if installed; then
    echo "srt: ai-dynamo at $commit is installed in $prefix"
    exit 0
fi
pip() {{ PIP_BREAK_SYSTEM_PACKAGES=1 "$python" -m pip "$@"; }}
build() {{
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    if ! command -v git >/dev/null || ! command -v protoc >/dev/null || ! command -v cargo >/dev/null; then
        if command -v apt-get >/dev/null; then
            apt-get update -qq
            apt-get install -y -qq git curl libclang-dev protobuf-compiler >/dev/null
        fi
    fi
    if ! command -v cargo >/dev/null; then
        [ -f "$HOME/.cargo/env" ] || curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs \
            | sh -s -- -y -q --default-toolchain stable
        . "$HOME/.cargo/env"
    fi
    "$python" -c 'import maturin' 2>/dev/null || pip install --quiet --no-input maturin
    git clone --quiet {REPOSITORY} "$work/dynamo"
    git -C "$work/dynamo" checkout --quiet "$commit"
    mkdir -p "$cache.partial"
    (cd "$work/dynamo/lib/bindings/python" &&
        RUSTFLAGS="${{RUSTFLAGS:-}} --cfg tokio_unstable" "$python" -m maturin build --release -o "$cache.partial")
    pip wheel --quiet --no-input --no-deps -w "$cache.partial" "$work/dynamo"
    rm -rf "$cache"
    mv "$cache.partial" "$cache"
}}
mkdir -p "$(dirname "$cache")"
exec 8>>"$cache.lock"
flock -x 8
if [ ! -d "$cache" ]; then
    echo "srt: building ai-dynamo at $commit into $cache"
    rm -rf "$cache.partial"
    build
fi
flock -u 8
echo "srt: installing ai-dynamo at $commit into $prefix"
pip install --quiet --no-input --force-reinstall --extra-index-url {EXTRA_INDEX} \
    "$cache"/ai_dynamo_runtime-*.whl "$cache"/ai_dynamo-*.whl
if ! installed; then
    echo "srt: $python does not import ai-dynamo at $commit after the install" >&2
    exit 1
fi
echo "srt: ai-dynamo at $commit installed"
"#,
        python_q = q(python),
        commit_q = q(commit),
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
        let a = setup(&Install::Release("0.8.0".into()), "python3");
        let b = setup(&Install::Release("0.8.1".into()), "python3");
        assert_eq!(a, setup(&Install::Release("0.8.0".into()), "python3"));
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
            &*setup(
                &Install::Release(release.into()),
                &python.display().to_string(),
            )
            .text,
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

    /// Stand-ins for the build's programs, in `dir/bin`: `git` (a clone makes the
    /// tree), `cargo` and `protoc` (present), `apt-get` and `curl` (recorded: the node
    /// has the tools, so neither may run), and a `python` that answers `sys.prefix` (`dir/<env>`), runs `maturin` and
    /// `pip wheel` as writing a wheel, and records every call in `dir/calls`.
    fn fake_build_tools(dir: &std::path::Path) -> std::path::PathBuf {
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let d = dir.display();
        let git = format!(
            r#"#!/usr/bin/env bash
echo "git $*" >> {d}/calls
[ "$1" = clone ] && mkdir -p "${{@: -1}}/lib/bindings/python"
[ "$1" = -C ] && [ -e {d}/checkout-fails ] && exit 1
exit 0
"#
        );
        let python = format!(
            r#"#!/usr/bin/env bash
echo "python $*" >> {d}/calls
case "$1 $2" in
  "-c import sys; print(sys.prefix)") mkdir -p "{d}/$SRT_TEST_ENV"; echo "{d}/$SRT_TEST_ENV";;
  "-c import maturin") exit 0;;
  "-m maturin") [ -e {d}/maturin-fails ] && exit 1
     out="${{@: -1}}"; touch "$out/ai_dynamo_runtime-1.7.0-cp310-abi3-linux_x86_64.whl"; echo "$RUSTFLAGS" > {d}/rustflags;;
  "-m pip") prev=; for w in "$@"; do [ "$prev" = -w ] && touch "$w/ai_dynamo-1.7.0-py3-none-any.whl"; prev="$w"; done
     [ "$3" = install ] && [ ! -e {d}/pip-installs-nothing ] && echo "$*" > "{d}/$SRT_TEST_ENV/installed";;
  "- "*) cat > /dev/null; grep -q "/dynamo-build/$2/" "{d}/$SRT_TEST_ENV/installed" 2>/dev/null; exit $?;;
esac
exit 0
"#
        );
        // The node has the toolchain: nothing may reach for apt-get or rustup.
        let has = "#!/usr/bin/env bash\nexit 0\n".to_string();
        let forbidden = format!("#!/usr/bin/env bash\necho \"fetch $0 $*\" >> {d}/calls\nexit 1\n");
        for (name, body) in [
            ("git", git),
            ("python", python),
            ("cargo", has.clone()),
            ("protoc", has),
            ("apt-get", forbidden.clone()),
            ("curl", forbidden),
        ] {
            let path = bin.join(name);
            std::fs::write(&path, body).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        bin.join("python")
    }

    /// Runs the commit's script as `<run>/setup/<name>.sh` in environment `env`.
    fn build(dir: &std::path::Path, commit: &str, env: &str) -> std::process::Output {
        let python = dir.join("bin/python");
        let setup = setup(
            &Install::Commit(commit.into()),
            &python.display().to_string(),
        );
        let script = dir.join("run/setup/build.sh");
        std::fs::create_dir_all(script.parent().unwrap()).unwrap();
        std::fs::write(&script, &*setup.text).unwrap();
        let path = format!(
            "{}:{}",
            dir.join("bin").display(),
            std::env::var("PATH").unwrap()
        );
        std::process::Command::new("bash")
            .arg(&script)
            .env("PATH", path)
            .env("SRT_TEST_ENV", env)
            .output()
            .unwrap()
    }

    fn calls(dir: &std::path::Path, what: &str) -> usize {
        std::fs::read_to_string(dir.join("calls"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(what))
            .count()
    }

    #[test]
    fn a_commit_is_built_once_per_run_and_installed_once_per_environment() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fake_build_tools(d);
        let out = build(d, "81d0555", "env-a");
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            calls(
                d,
                "git clone --quiet https://github.com/ai-dynamo/dynamo.git"
            ),
            1
        );
        assert_eq!(calls(d, "checkout --quiet 81d0555"), 1);
        assert_eq!(calls(d, "-m maturin build --release -o"), 1);
        assert_eq!(calls(d, "-m pip wheel"), 1);
        assert_eq!(calls(d, "fetch "), 0);
        let built = d.join("run/setup/dynamo-build/81d0555");
        assert!(built.join("ai_dynamo-1.7.0-py3-none-any.whl").exists());
        assert!(!d.join("run/setup/dynamo-build/81d0555.partial").exists());
        let rustflags = std::fs::read_to_string(d.join("rustflags")).unwrap();
        assert_eq!(rustflags.trim(), "--cfg tokio_unstable");
        let install = std::fs::read_to_string(d.join("calls")).unwrap();
        let install = install.lines().find(|l| l.contains("pip install")).unwrap();
        assert!(
            install.contains("ai_dynamo_runtime-1.7.0-cp310-abi3-linux_x86_64.whl"),
            "{install}"
        );
        assert!(
            install.contains("ai_dynamo-1.7.0-py3-none-any.whl"),
            "{install}"
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("ai-dynamo at 81d0555 installed"));

        // Another environment (another node's container) installs what was built.
        let out = build(d, "81d0555", "env-b");
        assert!(out.status.success(), "{out:?}");
        assert_eq!(calls(d, "git clone"), 1);
        assert_eq!(
            calls(d, "pip install --quiet --no-input --force-reinstall"),
            2
        );
        // The same environment again (a restart) installs nothing.
        let out = build(d, "81d0555", "env-a");
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("is installed"));
        assert_eq!(
            calls(d, "pip install --quiet --no-input --force-reinstall"),
            2
        );
        // Another commit is built and replaces it.
        let out = build(d, "4e40061", "env-a");
        assert!(out.status.success(), "{out:?}");
        assert_eq!(calls(d, "git clone"), 2);
        let installed = std::fs::read_to_string(d.join("env-a/installed")).unwrap();
        assert!(installed.contains("/dynamo-build/4e40061/"), "{installed}");
    }

    #[test]
    fn a_failed_build_installs_nothing_and_the_next_process_builds_again() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fake_build_tools(d);
        std::fs::write(d.join("maturin-fails"), "").unwrap();
        let out = build(d, "81d0555", "env-a");
        assert!(!out.status.success(), "{out:?}");
        assert!(!d.join("run/setup/dynamo-build/81d0555").exists());
        assert!(!d.join("env-a/installed").exists());
        assert_eq!(
            calls(d, "pip install --quiet --no-input --force-reinstall"),
            0
        );
        std::fs::remove_file(d.join("maturin-fails")).unwrap();
        let out = build(d, "81d0555", "env-a");
        assert!(out.status.success(), "{out:?}");
        assert_eq!(calls(d, "git clone"), 2);
    }

    #[test]
    fn an_install_that_leaves_another_dynamo_fails_the_process() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fake_build_tools(d);
        std::fs::write(d.join("pip-installs-nothing"), "").unwrap();
        let out = build(d, "81d0555", "env-a");
        assert!(!out.status.success(), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("does not import ai-dynamo at 81d0555")
        );
    }

    #[test]
    fn a_commit_and_a_release_are_different_scripts() {
        let commit = setup(&Install::Commit("81d0555".into()), "python3");
        let other = setup(&Install::Commit("4e40061".into()), "python3");
        let release = setup(&Install::Release("1.6.1".into()), "python3");
        assert_ne!(commit.digest, other.digest);
        assert!(
            commit.path.starts_with("<run-dir>/setup/dynamo-build-"),
            "{}",
            commit.path
        );
        assert!(
            release.path.starts_with("<run-dir>/setup/dynamo-install-"),
            "{}",
            release.path
        );
        assert_eq!(commit.source, "ai-dynamo at 81d0555");
    }
}
