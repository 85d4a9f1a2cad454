//! Trust boundaries: srt follows no link planted where it writes, uses no directory
//! another user can write, never acts on a path read from state, stops a process whose
//! lease is gone only when it can prove it is its own, and can stop a deployment on a
//! full disk.
//!
//! Another local user is emulated with `setpriv --reuid=65534` (root only; without
//! root those parts are skipped with a note). Deployments run the simulator behind the
//! real vllm-router, each scenario in its own network namespace when root.

mod e2e_support;

use e2e_support::{example_named, live_processes, text, wait_for, Env};
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A file standing for something another user wants srt to write to: its content and
/// mode must never change.
struct Victim(PathBuf);

impl Victim {
    fn new(dir: &Path, name: &str) -> Victim {
        let p = dir.join(name);
        std::fs::write(&p, "victim\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        Victim(p)
    }

    fn untouched(&self) {
        let meta = std::fs::metadata(&self.0)
            .unwrap_or_else(|e| panic!("{} is gone: {e}", self.0.display()));
        assert_eq!(std::fs::read_to_string(&self.0).unwrap(), "victim\n");
        assert_eq!(meta.mode() & 0o777, 0o644, "{}", self.0.display());
    }
}

fn mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `cmd` run as user 65534, which must succeed.
fn as_nobody(args: &[&str]) {
    let status = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), "as nobody: {args:?}");
}

#[test]
fn a_state_directory_others_can_write_is_refused_and_nothing_is_written_through_it() {
    let env = Env::new();
    let recipe = env.recipe("r.yaml", &example_named("local-agg.yaml", "shared"));
    let victim = Victim::new(env.dir.path(), "victim");
    // Writable by everyone: whoever can write it could plant links in it.
    let root = env.dir.path().join("open");
    std::fs::create_dir_all(root.join("shared/logs")).unwrap();
    for d in ["", "shared", "shared/logs"] {
        mode(&root.join(d), 0o777);
    }
    symlink(&victim.0, root.join("shared/logs/router[0].log")).unwrap();
    let state_dir = root.display().to_string();
    for args in [
        vec!["apply", "-f", &recipe, "--simulate", "--auto-approve"],
        vec!["plan", "-f", &recipe, "--simulate"],
        vec!["status", "shared"],
        vec!["destroy", "shared", "--auto-approve"],
    ] {
        let mut args = args.clone();
        args.extend(["--state-dir", &state_dir]);
        let out = env.srt(&args);
        let shown = text(&out);
        assert_eq!(out.status.code(), Some(4), "{args:?}: {shown}");
        assert!(shown.contains("can be written by other users"), "{shown}");
        assert!(shown.contains("srt::state::untrusted"), "{shown}");
        assert!(shown.contains(&state_dir), "the message names it: {shown}");
    }
    victim.untouched();
    assert!(live_processes("shared").is_empty());

    if !is_root() {
        eprintln!("not root: the second user's directory is not tried");
        return;
    }
    // Another user's directory, even one only it can write: root's apply stays out.
    let theirs = env.dir.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    mode(&theirs, 0o1777);
    as_nobody(&["mkdir", "-m", "0700", &format!("{}/.srt", theirs.display())]);
    let out = env.srt(&[
        "apply",
        "-f",
        &recipe,
        "--simulate",
        "--auto-approve",
        "--state-dir",
        &format!("{}/.srt", theirs.display()),
    ]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(4), "{shown}");
    assert!(shown.contains("is owned by uid 65534"), "{shown}");
    assert!(live_processes("shared").is_empty());
}

#[test]
fn links_planted_in_a_deployment_directory_are_never_followed() {
    let env = Env::new();
    let recipe = env.recipe("r.yaml", &example_named("local-agg.yaml", "links"));
    let dir = env.deployment_dir("links");
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    std::fs::create_dir_all(dir.join("leases")).unwrap();
    let victims: Vec<Victim> = ["lock", "log", "lease", "journal"]
        .iter()
        .map(|n| Victim::new(env.dir.path(), n))
        .collect();
    // The lock: refused outright, with the path in the message.
    symlink(&victims[0].0, dir.join("lock")).unwrap();
    let out = env.srt(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    let shown = text(&out);
    assert_ne!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("lock"), "{shown}");
    victims[0].untouched();
    std::fs::remove_file(dir.join("lock")).unwrap();

    // A worker's log and lease: that worker does not start, nothing is written through.
    symlink(&victims[1].0, dir.join("logs/worker.agg[0].node[0].log")).unwrap();
    symlink(
        &victims[2].0,
        dir.join("leases/worker.agg[1].node[0].lease"),
    )
    .unwrap();
    let out = env.srt(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(7), "{shown}");
    victims[1].untouched();
    victims[2].untouched();
    std::fs::remove_file(dir.join("logs/worker.agg[0].node[0].log")).unwrap();
    std::fs::remove_file(dir.join("leases/worker.agg[1].node[0].lease")).unwrap();

    // The journal, written while an apply runs: refused, not appended to.
    symlink(&victims[3].0, dir.join("state.journal")).unwrap();
    let _ = env.srt(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    victims[3].untouched();
    std::fs::remove_file(dir.join("state.journal")).unwrap();

    env.apply(&recipe);
    env.destroy("links");
    victims.iter().for_each(Victim::untouched);
}

/// The first address of the state that names a worker.
fn a_worker(state: &serde_json::Value) -> String {
    state["resources"]
        .as_object()
        .unwrap()
        .keys()
        .find(|a| a.starts_with("worker."))
        .expect("a worker")
        .clone()
}

#[test]
fn paths_recorded_in_state_are_never_used() {
    let env = Env::new();
    let recipe = env.recipe("r.yaml", &example_named("local-agg.yaml", "forged"));
    env.apply(&recipe);
    let secret = Victim::new(env.dir.path(), "secret");
    let lease_victim = Victim::new(env.dir.path(), "lease-victim");
    let mut state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.state_path("forged")).unwrap()).unwrap();
    let worker = a_worker(&state);
    let pid = state["resources"][&worker]["runtime"]["pid"]
        .as_u64()
        .unwrap() as u32;
    state["resources"][&worker]["log_path"] = secret.0.display().to_string().into();
    state["resources"][&worker]["runtime"]["lease"] = lease_victim.0.display().to_string().into();
    env.write_state("forged", &state);

    // `srt logs` shows the worker's own log, not the file the record names.
    let logs = env.ok(&["logs", "forged", &worker]);
    assert!(!logs.contains("victim"), "{logs}");
    assert!(logs.contains("srt: starting"), "{logs}");

    // The worker dies; apply replaces it and removes nothing the record names.
    e2e_support::sigkill(pid).unwrap();
    wait_for("the worker to die", || !e2e_support::alive(pid));
    env.apply(&recipe);
    lease_victim.untouched();
    env.destroy("forged");
    lease_victim.untouched();
    secret.untouched();

    // An address that would name a file elsewhere is refused as a corrupt state.
    env.apply(&recipe);
    let mut state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.state_path("forged")).unwrap()).unwrap();
    let worker = a_worker(&state);
    let record = state["resources"][&worker].clone();
    state["resources"]["../../lease-victim"] = record;
    env.write_state("forged", &state);
    let out = env.srt(&["destroy", "forged", "--auto-approve"]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(4), "{shown}");
    assert!(shown.contains("not a name srt gives"), "{shown}");
    lease_victim.untouched();
    state["resources"]
        .as_object_mut()
        .unwrap()
        .remove("../../lease-victim");
    env.write_state("forged", &state);
    env.destroy("forged");
}

#[test]
fn a_saved_plan_is_never_written_through_a_planted_name() {
    let env = Env::new();
    let recipe = env.recipe("r.yaml", &example_named("local-agg.yaml", "saved"));
    let victim = Victim::new(env.dir.path(), "victim");
    // The old temporary name was `.<file>.tmp.<pid>`: every pid srt could get next.
    let first = std::process::id();
    for pid in first..first + 400 {
        symlink(
            &victim.0,
            env.dir.path().join(format!(".plan.json.tmp.{pid}")),
        )
        .unwrap();
    }
    symlink(&victim.0, env.dir.path().join("plan.json")).unwrap();
    let out = env.srt(&["plan", "-f", &recipe, "--simulate", "-o", "plan.json"]);
    assert!(out.status.success(), "{}", text(&out));
    victim.untouched();
    let meta = std::fs::symlink_metadata(env.dir.path().join("plan.json")).unwrap();
    assert!(meta.file_type().is_file(), "the plan replaced the link");
    assert_eq!(meta.mode() & 0o777, 0o600);
}

#[test]
fn a_process_whose_lease_is_gone_is_stopped_through_its_markers() {
    let env = Env::new();
    let recipe = env.recipe("r.yaml", &example_named("local-agg.yaml", "unleased"));
    env.apply(&recipe);
    assert!(!live_processes("unleased").is_empty());
    std::fs::remove_dir_all(env.deployment_dir("unleased").join("leases")).unwrap();
    env.destroy("unleased");
    assert!(live_processes("unleased").is_empty());
}

/// A tmpfs of `size` mounted at `at` for the scenario; unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let status = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at)
            .status()
            .unwrap();
        assert!(status.success(), "mount tmpfs at {}", at.display());
        Tmpfs(at.to_path_buf())
    }

    /// Fill it: a file written until the filesystem refuses.
    fn fill(&self) -> PathBuf {
        let filler = self.0.join("filler");
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 64 * 1024];
        while std::io::Write::write_all(&mut f, &block).is_ok() {}
        let small = vec![0u8; 512];
        while std::io::Write::write_all(&mut f, &small).is_ok() {}
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_still_lets_destroy_stop_everything_and_says_so() {
    if !is_root() {
        eprintln!("not root: no tmpfs to fill; skipped");
        return;
    }
    let env = Env::new();
    let recipe = env.recipe("r.yaml", &example_named("local-agg.yaml", "full"));
    let disk = Tmpfs::mount(&env.dir.path().join("disk"), "16m");
    let state_dir = disk.0.join(".srt").display().to_string();
    let with_state = |args: &[&str]| {
        let mut args = args.to_vec();
        args.extend(["--state-dir", &state_dir]);
        env.srt(&args)
    };
    let out = with_state(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    assert!(out.status.success(), "{}", text(&out));
    let filler = disk.fill();

    // A plan writes nothing: it still works.
    let out = with_state(&["plan", "-f", &recipe, "--simulate"]);
    assert!(out.status.success(), "plan on a full disk: {}", text(&out));
    // Destroy stops everything, and says the state could not be written.
    let out = with_state(&["destroy", "full", "--auto-approve"]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(9), "{shown}");
    assert!(
        shown.contains("filesystem holding the state is full"),
        "{shown}"
    );
    wait_for("every process to exit", || {
        live_processes("full").is_empty()
    });

    std::fs::remove_file(filler).unwrap();
    let out = with_state(&["destroy", "full", "--auto-approve"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = with_state(&["status", "full", "--json"]);
    let shown = text(&out);
    assert!(
        !shown.contains("\"worker."),
        "nothing is left recorded: {shown}"
    );
}
