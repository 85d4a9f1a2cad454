//! End to end on the local executor: a recipe's `setup_script` runs before each
//! simulated worker's program, in the same process and with its environment
//! (`environment`'s `{node_id}` expanded); a changed script replaces the workers and
//! nothing else; a failing one keeps the program from starting.

mod e2e_support;

use e2e_support::{repo, serial, Env};

const NAME: &str = "runtime-keys";

fn recipe(env: &Env) -> String {
    let text = std::fs::read_to_string(repo().join("examples/local-agg.yaml"))
        .unwrap()
        .replace("name: local-agg", &format!("name: {NAME}"));
    env.recipe(
        "rt.yaml",
        &format!("{text}setup_script: scripts/setup.sh\nhost_setup: scripts/host.sh\nenvironment:\n  RT_NODE: \"n{{node_id}}\"\nidentity:\n  model:\n    repo: Qwen/Qwen3-0.6B\n    revision: abc123\n"),
    )
}

fn script(env: &Env, body: &str) {
    let dir = env.dir.path().join("scripts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("setup.sh"), body).unwrap();
    // No container locally: `host_setup` runs in the same wrapper, first.
    std::fs::write(dir.join("host.sh"), "echo srt-host-setup-ran\n").unwrap();
}

fn log(env: &Env, address: &str) -> String {
    let path = env
        .deployment_dir(NAME)
        .join("logs")
        .join(format!("{address}.log"));
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn a_setup_script_runs_before_each_simulated_worker() {
    let _g = serial();
    let env = Env::new();
    let recipe = recipe(&env);
    // Slow enough that a program started beside it would have logged first.
    script(
        &env,
        "set -eu\nsleep 0.5\necho \"srt-setup-ran resource=$SRT_RESOURCE node=$RT_NODE pid=$$\"\n",
    );
    let out = env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    assert!(out.contains("Apply complete"), "{out}");
    let v = env.completion("http://127.0.0.1:8000");
    assert!(v["choices"][0]["text"].is_string(), "{v}");
    for worker in ["worker.agg[0].node[0]", "worker.agg[1].node[0]"] {
        let text = log(&env, worker);
        let ran = text
            .find(&format!("srt-setup-ran resource={worker} node=n0"))
            .unwrap_or_else(|| panic!("{worker}: the script did not run:\n{text}"));
        // The first lines of the process, after srt's marker: the host setup, then the
        // setup script, nothing of the program's before them.
        let started = text.rfind("--- srt: starting").unwrap();
        let mut lines = text[started..].lines().skip(1);
        assert_eq!(
            lines.next(),
            Some("srt-host-setup-ran"),
            "{worker}:\n{text}"
        );
        assert!(
            lines
                .next()
                .unwrap_or_default()
                .starts_with("srt-setup-ran"),
            "{worker}: the program logged before the script ran:\n{text}"
        );
        assert!(ran > started);
        // The script ran in its own bash; the shell then became the program: the
        // recorded pid is the simulator's, alive, serving.
        let pid = env.pid(NAME, worker);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        assert!(
            String::from_utf8_lossy(&cmdline).contains("srt-vllm-sim"),
            "{worker}: pid {pid} is not the simulator"
        );
    }
    // The identity is recorded with the apply and shown, in no hash.
    let status = env.ok(&["status", NAME]);
    assert!(
        status.contains("identity: model=Qwen/Qwen3-0.6B@abc123"),
        "{status}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&env.stdout(&["status", NAME, "--json"])).unwrap();
    assert_eq!(json["identity"]["model"]["revision"], "abc123");
    assert_eq!(
        env.state(NAME)["identity"]["model"]["repo"],
        "Qwen/Qwen3-0.6B"
    );
    let plan: serde_json::Value =
        serde_json::from_str(&env.stdout(&["plan", "-f", &recipe, "--simulate", "--json"]))
            .unwrap();
    assert_eq!(plan["identity"]["model"]["revision"], "abc123");
    assert_eq!(plan["has_changes"], false);

    // What runs is srt's copy, in the run directory.
    let copy = env.deployment_dir(NAME).join("run/setup/setup_script.sh");
    assert!(std::fs::read_to_string(&copy)
        .unwrap()
        .contains("srt-setup-ran"));

    // A changed script replaces the workers that run it, and the Router keeps running.
    let router = env.pid(NAME, "router[0]");
    script(&env, "echo srt-setup-second\n");
    let out = env.srt(&["plan", "-f", &recipe, "--simulate", "--detailed-exitcode"]);
    let plan = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(2), "{plan}");
    assert!(
        plan.contains("worker.agg[0].node[0] will be replaced"),
        "{plan}"
    );
    assert!(!plan.contains("router[0] will be replaced"), "{plan}");
    let out = env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    assert!(out.contains("Apply complete"), "{out}");
    assert!(log(&env, "worker.agg[1].node[0]").contains("srt-setup-second"));
    assert_eq!(env.pid(NAME, "router[0]"), router);

    // A failing script: the program never starts, apply fails, the log says why.
    script(&env, "echo srt-setup-failing >&2\nexit 3\n");
    let out = env.srt(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    assert!(!out.status.success(), "{}", e2e_support::text(&out));
    let text = log(&env, "worker.agg[0].node[0]");
    let last = &text[text.rfind("--- srt: starting").unwrap()..];
    assert!(last.contains("srt-setup-failing"), "{last}");
    assert!(
        !last.contains("Uvicorn") && !last.contains("srt-vllm-sim"),
        "{last}"
    );

    let out = env.ok(&["destroy", NAME, "--auto-approve"]);
    assert!(out.contains("Destroy complete"), "{out}");
    e2e_support::assert_no_orphans(&env, NAME);
}
