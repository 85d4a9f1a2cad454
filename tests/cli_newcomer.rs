//! What a newcomer meets first, end to end through the binary: a program that is not
//! installed is named with the way to get it before anything starts; plan, apply and
//! destroy count the same resources; an emptied deployment leaves `srt list`; the plan
//! of a local deployment shows the addresses it will use; messages agree in number.

mod e2e_support;

use e2e_support::*;

/// Plan warns and apply refuses, naming each missing program, the processes that need
/// it and how to get it; nothing is started or recorded.
#[test]
fn a_missing_program_is_named_with_its_install_hint_before_anything_starts() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe("agg.yaml", &example_named("local-agg.yaml", "new-missing"));
    let bare = |args: &[&str]| {
        env.command(args)
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap()
    };

    let out = bare(&["plan", "-f", &recipe]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    insta::assert_snapshot!("missing_program_plan_warning", stderr);

    let out = bare(&["apply", "-f", &recipe, "--auto-approve"]);
    assert_eq!(out.status.code(), Some(srt::exit::ERROR), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    insta::assert_snapshot!("missing_program_apply_refusal", stderr);

    let state = srt::state::StateStore::new(env.deployment_dir("new-missing"))
        .load()
        .unwrap();
    assert!(
        state.as_ref().is_none_or(|s| s.resources.is_empty()),
        "{state:#?}"
    );
    assert!(live_processes("new-missing").is_empty());

    // The simulator stands in for `vllm`; only the Router is still missing.
    let out = bare(&["plan", "-f", &recipe, "--simulate"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("vllm-router"), "{stderr}");
    assert!(!stderr.contains("`vllm`"), "{stderr}");
}

/// A `PATH` the recipe's `env` sets is where the program is looked for, as the process
/// would; the message names that `PATH` instead of telling to install the program.
#[test]
fn a_program_missing_from_the_recipes_own_path_names_that_path() {
    let _g = serial();
    let env = Env::new();
    let yaml = example_named("local-agg.yaml", "new-env-path").replace(
        "  args:\n    policy: round_robin\n",
        "  args:\n    policy: round_robin\n  env:\n    PATH: /nonexistent\n",
    );
    assert!(yaml.contains("PATH: /nonexistent"));
    let recipe = env.recipe("agg.yaml", &yaml);
    let out = env
        .command(&["apply", "-f", &recipe, "--simulate", "--auto-approve"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(srt::exit::ERROR), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`vllm-router` (run by router[0]): not on the PATH the recipe's")
            && stderr.contains("(`PATH: /nonexistent`)"),
        "{stderr}"
    );
    assert!(!stderr.contains("install-router.sh"), "{stderr}");
    assert!(live_processes("new-env-path").is_empty());
}

/// The numbers of one deployment's life agree: what the plan creates and checks, apply
/// creates and checks, and destroy destroys; `srt list` then forgets it unless `--all`.
#[test]
fn plan_apply_and_destroy_count_the_same_resources_and_list_forgets_an_emptied_deployment() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe("agg.yaml", &example_named("local-agg.yaml", "new-counts"));

    let plan = env.ok(&["plan", "-f", &recipe, "--simulate"]);
    assert!(
        plan.contains("Plan: 7 to create, 0 to replace, 0 to destroy, 3 to check."),
        "{plan}"
    );
    // The local executor knows every node is this machine.
    assert!(
        plan.contains("+ http://127.0.0.1:6100 (worker.agg[0].node[0])"),
        "{plan}"
    );
    assert!(!plan.contains("<node0-ip>"), "{plan}");
    // Replicas in declaration order.
    let first = plan.find("# worker.agg[0].node[0]").unwrap();
    let second = plan.find("# worker.agg[1].node[0]").unwrap();
    assert!(first < second, "{plan}");

    let out = env.apply(&recipe);
    assert!(
        out.contains("Apply complete: 7 created, 0 replaced, 0 destroyed, 3 checked."),
        "{out}"
    );
    // Destroy removes every recorded resource: the 7 created and the 3 checks' records.
    let out = env.ok(&["destroy", "new-counts", "--auto-approve"]);
    assert!(
        out.contains("Plan: 0 to create, 0 to replace, 10 to destroy."),
        "{out}"
    );
    assert!(out.contains("Destroy complete: 10 destroyed."), "{out}");

    let list = env.ok(&["list"]);
    assert!(!list.contains("new-counts"), "{list}");
    let all = env.ok(&["list", "--all"]);
    assert!(all.contains("new-counts"), "{all}");
}

/// One aggregated worker on one GPU.
const ONE_WORKER: &str = "roles:\n  agg:\n    nodes: 1\n    workers: 1\n    gpus: 1\n";

#[test]
fn validate_counts_agree_in_number() {
    let env = Env::new();
    let one = env.recipe("one.yaml", ONE_WORKER);
    let out = env.ok(&["validate", "-f", &one]);
    assert!(out.contains("valid (2 processes on 1 node)"), "{out}");
    let dp = repo().join("examples/local-dp.yaml");
    let out = env.ok(&["validate", "-f", dp.to_str().unwrap()]);
    assert!(out.contains("processes on 2 nodes)"), "{out}");
}

/// A setting exported empty (`SRT_CLUSTER= srt validate ...`) is unset, as for most
/// programs: no cluster profile, the default state directory, no simulation.
#[test]
fn an_empty_setting_in_the_environment_is_unset() {
    let env = Env::new();
    let one = env.recipe("one.yaml", ONE_WORKER);
    for var in ["SRT_CLUSTER", "SRT_STATE_DIR", "SRT_SIMULATE"] {
        let out = env
            .command(&["validate", "-f", &one])
            .env(var, "")
            .output()
            .unwrap();
        let shown = text(&out);
        assert!(out.status.success(), "{var}=: {shown}");
        assert!(shown.contains("valid (2 processes on 1 node)"), "{shown}");
    }
    let out = env
        .command(&["list"])
        .env("SRT_STATE_DIR", "")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
}
