//! What runs around a process's program (the recipe's runtime keys): setup scripts
//! run by `bash` before it, words before it (a profiler), directories of the run
//! directory it writes to, and the mounts its container gets. The program's own argv
//! stays as the engine built it (so `--simulate` still finds it); an executor runs
//! [`Wrap::command`].

use serde::Serialize;
use std::sync::Arc;

/// What runs around one process's program. Empty for most processes.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Wrap {
    /// Scripts run before the program, in order (`host_setup`, then `setup_script`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<Setup>,
    /// Words the program runs after (`nsys profile ... -o <run-dir>/profiles/...`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prefix: Vec<String>,
    /// Directories (placeholders kept) created before the process starts: where it
    /// writes (a profiler's output).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dirs: Vec<String>,
    /// Bind mounts of its container, `SRC:DST[:FLAGS]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<String>,
}

/// A script run before the program: srt's copy of the file the recipe names, written
/// into the run directory when the process starts, so what runs is what was read and
/// hashed (the file named may change or belong to someone else by then).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Setup {
    /// The recipe key (`setup_script`, `host_setup`).
    pub key: &'static str,
    /// It runs on the node, outside the process's container (`host_setup`).
    pub on_host: bool,
    /// The file the recipe names, as written (shown; not in the hash).
    pub source: String,
    /// srt's copy, `<run-dir>/setup/<key>.sh`.
    pub path: String,
    /// `blake3:` digest of its contents (in the hash: a changed script replaces the
    /// processes that run it).
    pub digest: String,
    /// Its contents, shared by every process that runs it.
    #[serde(skip)]
    pub text: Arc<str>,
}

/// One worker process's profiling, as its engine is told of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileRun {
    /// The profiler.
    pub kind: crate::recipe::runtime::ProfilerKind,
    /// The engine step capture starts at.
    pub start_step: u32,
    /// The step it stops at.
    pub stop_step: u32,
    /// Where its output goes (placeholders kept): `<run-dir>/profiles/<role>`.
    pub dir: String,
}

/// The name the setup wrapper shows as its `$0`.
pub const SETUP_SHELL_NAME: &str = "srt-setup";

impl Wrap {
    /// Nothing around the program.
    pub fn is_empty(&self) -> bool {
        self.setup.is_empty()
            && self.prefix.is_empty()
            && self.dirs.is_empty()
            && self.mounts.is_empty()
    }

    /// The command that runs `program` (argv, resolved) after `scripts` (resolved
    /// paths, in order) and behind the prefix: `bash -c 'bash -- "$1" && ... && shift N
    /// && exec "$@"' srt-setup SCRIPT... PREFIX... PROGRAM...`. One process: the shell
    /// runs each script as its own `bash` (as srtctl does: a script's `exit` or `set
    /// -e` ends only itself) and, when all succeeded, becomes the program; a failed
    /// script ends the process with its status before the program starts.
    pub fn command(
        &self,
        scripts: &[String],
        program: Vec<String>,
        resolve: impl Fn(&str) -> String,
    ) -> Vec<String> {
        let mut words: Vec<String> = self.prefix.iter().map(|w| resolve(w)).collect();
        words.extend(program);
        if scripts.is_empty() {
            return words;
        }
        let mut body: Vec<String> = (1..=scripts.len())
            .map(|i| format!("bash -- \"${i}\""))
            .collect();
        body.push(format!("shift {}", scripts.len()));
        body.push("exec \"$@\"".into());
        let mut out = vec![
            "bash".to_string(),
            "-c".to_string(),
            body.join(" && "),
            SETUP_SHELL_NAME.to_string(),
        ];
        out.extend(scripts.iter().cloned());
        out.extend(words);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(key: &'static str) -> Setup {
        Setup {
            key,
            on_host: false,
            source: "s.sh".into(),
            path: format!("<run-dir>/setup/{key}.sh"),
            digest: "blake3:x".into(),
            text: Arc::from("true\n"),
        }
    }

    #[test]
    fn no_script_runs_the_prefix_and_the_program() {
        let w = Wrap {
            prefix: vec!["nsys".into(), "-o".into(), "<run-dir>/p".into()],
            ..Default::default()
        };
        let id = |s: &str| s.replace("<run-dir>", "/r");
        assert_eq!(
            w.command(&[], vec!["vllm".into(), "serve".into()], id),
            ["nsys", "-o", "/r/p", "vllm", "serve"]
        );
    }

    #[test]
    fn scripts_run_in_order_then_the_shell_becomes_the_program() {
        let w = Wrap {
            setup: vec![setup("host_setup"), setup("setup_script")],
            ..Default::default()
        };
        let cmd = w.command(
            &["/r/a.sh".into(), "/r/b.sh".into()],
            vec!["vllm".into()],
            str::to_string,
        );
        assert_eq!(
            cmd,
            [
                "bash",
                "-c",
                "bash -- \"$1\" && bash -- \"$2\" && shift 2 && exec \"$@\"",
                SETUP_SHELL_NAME,
                "/r/a.sh",
                "/r/b.sh",
                "vllm"
            ]
        );
    }

    /// Runs the wrapper for real: each script in its own bash (an `exit` in one ends
    /// only it), the program after them, nothing after a failed one.
    #[test]
    fn a_script_runs_before_the_program_and_a_failed_one_stops_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let script = |name: &str, body: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, body).unwrap();
            p.display().to_string()
        };
        let ok = script(
            "ok.sh",
            &format!("set -eu\necho setup >> {}\nexit 0\n", log.display()),
        );
        let bad = script("bad.sh", "exit 7\n");
        let program = vec![
            "sh".to_string(),
            "-c".into(),
            format!("echo program >> {}", log.display()),
        ];
        let w = Wrap {
            setup: vec![setup("setup_script")],
            ..Default::default()
        };
        let run = |scripts: &[String]| {
            let cmd = w.command(scripts, program.clone(), str::to_string);
            std::process::Command::new(&cmd[0])
                .args(&cmd[1..])
                .status()
                .unwrap()
        };
        assert!(run(std::slice::from_ref(&ok)).success());
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "setup\nprogram\n");
        assert_eq!(run(&[bad, ok]).code(), Some(7));
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "setup\nprogram\n");
    }
}
