//! SIGKILL of `srt` at any moment leaves nothing that no record finds.
//!
//! Every scenario runs srt, and so every process it starts, inside a private network
//! namespace: whatever survives is counted (`ip netns pids`), whatever name it gave
//! itself. srt is SIGKILLed at moments spread from 1 ms to 1 s into `apply` (around its
//! launch batches, where a fork used to precede the record by a few milliseconds),
//! into an `apply` that replaces a worker, and into `destroy`. Each time the next
//! `apply` must converge without a duplicate process, and `destroy` must leave the
//! namespace empty. Needs root (network namespaces); the test command runs as root.

mod e2e_support;

use e2e_support::{example_named, Env, Netns};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Moments, in ms after the start of `apply`, at which srt is killed.
const APPLY_KILLS: &[u64] = &[
    1, 3, 6, 10, 15, 20, 25, 30, 40, 50, 60, 75, 90, 110, 140, 180, 230, 300, 400, 550, 750, 1000,
];
/// The same into an apply that replaces one worker (and, today, the Router).
const REPLACE_KILLS: &[u64] = &[5, 20, 40, 80, 150, 300, 600];
/// The same into `destroy`.
const DESTROY_KILLS: &[u64] = &[1, 5, 15, 40, 100, 250];

/// The scenario's namespace (every [`Env`] has one as root).
fn netns(env: &Env) -> &Netns {
    env.netns
        .as_ref()
        .expect("e2e_crash needs root to create network namespaces (the test command runs as root)")
}

/// `srt args` in the scenario's namespace, its output piped.
fn command(env: &Env, args: &[&str]) -> Command {
    let mut c = env.command(args);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// Start `srt args`, SIGKILL it `after` later (if still running).
fn kill_after(env: &Env, args: &[&str], after: Duration) {
    let mut child = command(env, args).spawn().unwrap();
    std::thread::sleep(after);
    // nsenter execs srt in place, so the child is srt itself.
    let _ = child.kill();
    let _ = child.wait();
}

/// Start `srt args --json`, SIGKILL it `after` the first event announcing a process
/// launch: inside the launch batch, between a fork and the save of its identity.
fn kill_in_launch(env: &Env, args: &[&str], after: Duration) {
    let mut args = args.to_vec();
    args.push("--json");
    let mut child = command(env, &args).spawn().unwrap();
    let events = std::io::BufReader::new(child.stdout.take().unwrap());
    for line in std::io::BufRead::lines(events) {
        let line = line.unwrap();
        if line.contains("\"apply_start\"")
            && (line.contains("\"worker.") || line.contains("\"router["))
        {
            break;
        }
    }
    std::thread::sleep(after);
    let _ = child.kill();
    let _ = child.wait();
}

/// After a converged apply: every process in the namespace belongs to a recorded
/// resource (its pid, or a member of its session), and each resource runs once.
fn every_process_is_recorded(env: &Env, deployment: &str, moment: &str) {
    let ns = netns(env);
    let state = env.state(deployment);
    let sessions: Vec<u32> = state["resources"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|r| r["runtime"]["pgid"].as_u64())
        .map(|p| p as u32)
        .collect();
    assert_eq!(
        sessions.len(),
        3,
        "{moment}: two workers and a Router recorded"
    );
    for pid in ns.pids() {
        let raw = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let Some(rest) = raw.rfind(')').map(|i| &raw[i + 2..]) else {
            continue;
        };
        let session: u32 = rest
            .split(' ')
            .nth(3)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        assert!(
            sessions.contains(&session),
            "{moment}: process {pid} is not any recorded resource's:\n{}",
            ns.describe()
        );
    }
}

fn run_kills(tag: &str, moments: &[u64], setup: impl Fn(&Env, &str) -> Vec<String>) {
    let mut survivors = Vec::new();
    for &ms in moments {
        let env = Env::new();
        env.startup_delay_ms.set(100);
        let name = format!("crash-{tag}-{ms}");
        let recipe = env.recipe("r.yaml", &example_named("local-agg.yaml", &name));
        let args = setup(&env, &recipe);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kill_after(&env, &args, Duration::from_millis(ms));
        let moment = format!("{tag} killed at {ms} ms");
        if tag != "destroy" {
            env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
            every_process_is_recorded(&env, &name, &moment);
        }
        let out = env.ok(&["destroy", &name, "--auto-approve"]);
        if let Err(left) = netns(&env).drained() {
            survivors.push(format!("{moment}: survivors after destroy:\n{left}\n{out}"));
        }
    }
    assert!(survivors.is_empty(), "{}", survivors.join("\n"));
}

#[test]
fn sigkill_during_apply_leaves_nothing_untracked() {
    run_kills("apply", APPLY_KILLS, |_, recipe| {
        vec![
            "apply".into(),
            "-f".into(),
            recipe.into(),
            "--simulate".into(),
            "--auto-approve".into(),
        ]
    });
}

/// Killed right inside the launch batch, aimed by apply's own events.
const LAUNCH_KILLS: &[u64] = &[0, 0, 1, 1, 2, 3, 5, 8];

#[test]
fn sigkill_inside_a_launch_batch_leaves_nothing_untracked() {
    let mut survivors = Vec::new();
    for (i, &ms) in LAUNCH_KILLS.iter().enumerate() {
        let env = Env::new();
        env.startup_delay_ms.set(100);
        let name = format!("crash-launch-{i}");
        let recipe = env.recipe("r.yaml", &example_named("local-agg.yaml", &name));
        kill_in_launch(
            &env,
            &["apply", "-f", &recipe, "--simulate", "--auto-approve"],
            Duration::from_millis(ms),
        );
        let moment = format!("killed {ms} ms into the launch batch (run {i})");
        env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
        every_process_is_recorded(&env, &name, &moment);
        let out = env.ok(&["destroy", &name, "--auto-approve"]);
        if let Err(left) = netns(&env).drained() {
            survivors.push(format!("{moment}: survivors after destroy:\n{left}\n{out}"));
        }
    }
    assert!(survivors.is_empty(), "{}", survivors.join("\n"));
}

#[test]
fn sigkill_during_a_replacement_leaves_nothing_untracked() {
    run_kills("replace", REPLACE_KILLS, |env, recipe| {
        env.ok(&["apply", "-f", recipe, "--simulate", "--auto-approve"]);
        vec![
            "apply".into(),
            "-f".into(),
            recipe.into(),
            "--simulate".into(),
            "--auto-approve".into(),
            "--replace".into(),
            "worker.agg[0].node[0]".into(),
        ]
    });
}

#[test]
fn sigkill_during_destroy_leaves_nothing_untracked() {
    run_kills("destroy", DESTROY_KILLS, |env, recipe| {
        env.ok(&["apply", "-f", recipe, "--simulate", "--auto-approve"]);
        let name = std::fs::read_to_string(recipe)
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("name: ").map(str::to_string))
            .unwrap();
        vec!["destroy".into(), name, "--auto-approve".into()]
    });
}
