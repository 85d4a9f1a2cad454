//! Interrupts and concurrency on the local executor, end to end.
//!
//! - SIGINT and SIGTERM, once or twice, at seeded random points of an apply (first
//!   launches, gate waits, and the stop phase of a replacement): srt exits 130 (or 0 if
//!   it finished first, or dies of the signal before it has started anything), state
//!   stays parseable, the lock is free, every live process of the deployment is
//!   recorded, and the next apply converges with no orphan.
//! - Two applies at once: the second is refused naming the holder, or waits for the
//!   lock with `--lock-timeout` and then finds nothing to do; state is never interleaved.
//!
//! `SRT_SIGNAL_SEEDS=N` runs N seeds instead of the default 6.

mod e2e_support;

use e2e_support::*;
use nix::sys::signal::Signal;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn signal(&mut self) -> Signal {
        if self.below(2) == 0 {
            Signal::SIGINT
        } else {
            Signal::SIGTERM
        }
    }
}

const DEPLOYMENT: &str = "hard-signals";

fn changed(recipe: &str) -> String {
    let out = recipe.replace("max-model-len: 2048", "max-model-len: 1024");
    assert_ne!(out, recipe);
    out
}

fn one_seed(seed: u64) {
    let mut rng = Rng::new(seed);
    let env = Env::new();
    let base = example_named("local-agg.yaml", DEPLOYMENT);
    let recipe = env.recipe("agg.yaml", &base);
    // Odd seeds interrupt a replacement (stop phase, then launches); even ones a first
    // apply.
    let replacing = seed % 2 == 1;
    if replacing {
        env.apply(&recipe);
        std::fs::write(&recipe, changed(&base)).unwrap();
    }
    let first = Duration::from_millis(rng.below(3500));
    let sig1 = rng.signal();
    let second = (rng.below(2) == 0).then(|| (Duration::from_millis(rng.below(400)), rng.signal()));
    let schedule =
        format!("seed {seed}: replacing={replacing}, {sig1} after {first:?}, then {second:?}");
    env.startup_delay_ms.set(1500);
    let mut child = env.spawn(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    std::thread::sleep(first);
    signal(child.id(), sig1);
    if let Some((after, sig2)) = second {
        std::thread::sleep(after);
        signal(child.id(), sig2);
    }
    let status = wait_child(&mut child, Duration::from_secs(90));
    let out = collect(child);
    let shown = text(&out);
    let sent = [Some(sig1), second.map(|s| s.1)];
    assert!(
        matches!(status.code(), Some(0) | Some(130))
            || status
                .signal()
                .is_some_and(|s| sent.iter().flatten().any(|x| *x as i32 == s)),
        "{schedule}: unexpected exit {status:?}\n{shown}"
    );
    assert!(!shown.contains("panicked"), "{schedule}:\n{shown}");
    eprintln!("{schedule}: exit {status:?}");
    // State parses, the lock is free, nothing runs unrecorded.
    let store = srt::state::StateStore::new(env.deployment_dir(DEPLOYMENT));
    let loaded = store
        .load()
        .unwrap_or_else(|e| panic!("{schedule}: state unreadable: {e}\n{shown}"));
    let lock = store
        .lock("check", None)
        .unwrap_or_else(|e| panic!("{schedule}: lock still held: {e}"));
    drop(lock);
    if loaded.is_some() {
        assert_all_recorded(&env, DEPLOYMENT);
    } else {
        assert!(live_processes(DEPLOYMENT).is_empty(), "{schedule}");
    }
    // The next apply converges: gates and smoke pass, nothing is orphaned, and a plan
    // after it has nothing to change.
    env.startup_delay_ms.set(200);
    let again = env.srt(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    let again_text = text(&again);
    assert!(
        again.status.success() && again_text.contains("smoke: passed"),
        "{schedule}: apply after the interrupt did not converge\n--- interrupted ---\n{shown}\n--- next ---\n{again_text}"
    );
    assert_no_orphans(&env, DEPLOYMENT);
    let plan = env.srt(&["plan", "-f", &recipe, "--simulate", "--detailed-exitcode"]);
    assert_eq!(plan.status.code(), Some(0), "{schedule}: {}", text(&plan));
    env.destroy(DEPLOYMENT);
}

#[test]
fn signals_at_random_points_of_apply_leave_a_consistent_state_that_converges() {
    let _g = serial();
    let seeds: u64 = std::env::var("SRT_SIGNAL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    for seed in 1..=seeds {
        one_seed(seed);
    }
}

#[test]
fn a_second_apply_is_refused_or_waits_and_state_is_never_interleaved() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe(
        "agg.yaml",
        &example_named("local-agg.yaml", "hard-concurrent"),
    );
    let lock_path = env.deployment_dir("hard-concurrent").join("lock");
    env.startup_delay_ms.set(1500);
    let mut first = env.spawn(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    let holder = first.id();
    wait_for("the first apply to hold the lock", || {
        std::fs::read_to_string(&lock_path).is_ok_and(|t| t.contains(&format!("\"pid\":{holder}")))
    });
    // Refused at once, naming the holder; a plan too.
    for args in [
        vec!["apply", "-f", &recipe, "--simulate", "--auto-approve"],
        vec!["plan", "-f", &recipe, "--simulate"],
    ] {
        let out = env.srt(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(srt::exit::LOCKED),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains(&format!("locked by pid {holder}")) && stderr.contains("`apply`"),
            "{args:?}: {stderr}"
        );
    }
    // Waits for the lock, then starts from the state the first apply left.
    let mut waiting = env.spawn(&[
        "apply",
        "-f",
        &recipe,
        "--simulate",
        "--auto-approve",
        "--lock-timeout",
        "120",
    ]);
    let status = wait_child(&mut first, Duration::from_secs(90));
    let first_out = collect(first);
    assert!(status.success(), "{}", text(&first_out));
    let after_first = env.state("hard-concurrent");
    let status = wait_child(&mut waiting, Duration::from_secs(90));
    let waited = collect(waiting);
    let shown = text(&waited);
    assert!(status.success(), "{shown}");
    assert!(
        shown.contains("No changes.") && shown.contains("nothing to change"),
        "{shown}"
    );
    let after_second = env.state("hard-concurrent");
    assert_eq!(after_first, after_second, "the waiting apply changed state");
    assert_eq!(std::fs::read_to_string(&lock_path).unwrap(), "");
    assert_no_orphans(&env, "hard-concurrent");
    env.destroy("hard-concurrent");
}
