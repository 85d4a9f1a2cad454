//! Operator commands against a live local deployment (real vllm-router, simulated
//! workers): `apply --json` events, `status`, `list`, `logs`, and `graph`.

mod e2e_support;
use e2e_support::Env;

#[test]
fn status_list_logs_and_json_events_on_a_live_deployment() {
    let env = Env::new();
    let recipe = e2e_support::repo().join("examples/local-agg.yaml");
    let recipe = recipe.to_str().unwrap();
    // `apply --json` with `extra` flags: its events.
    let apply_events = |extra: &[&str]| -> Vec<serde_json::Value> {
        let mut args = vec![
            "apply",
            "-f",
            recipe,
            "--simulate",
            "--auto-approve",
            "--json",
        ];
        args.extend(extra);
        env.stdout(&args)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    };
    let parsed = apply_events(&[]);
    let types: Vec<&str> = parsed.iter().map(|v| v["type"].as_str().unwrap()).collect();
    assert!(
        types.contains(&"planned_change")
            && types.contains(&"apply_start")
            && types.contains(&"apply_complete"),
        "{types:?}"
    );
    // The Router starts alongside its workers: it is launched before any worker has
    // finished starting (it waits for them itself), not after them.
    let position = |ty: &str, prefix: &str| {
        parsed
            .iter()
            .position(|v| {
                v["type"] == ty && v["address"].as_str().is_some_and(|a| a.starts_with(prefix))
            })
            .unwrap_or_else(|| panic!("no {ty} for {prefix}: {types:?}"))
    };
    assert!(
        position("apply_start", "router[0]") < position("apply_complete", "worker."),
        "{types:?}"
    );
    let last = parsed.last().unwrap();
    assert_eq!(last["type"], "change_summary");
    // Every resource, as the plan counts them: 7 created (processes, port blocks, the
    // membership) and 3 checks.
    assert_eq!(last["created"], 7);
    assert_eq!(last["checked"], 3);
    assert_eq!(last["url"], "http://127.0.0.1:8000");
    // The plan's summary event says when the plan trusted the records alone.
    let plan_summary = |extra: &[&str]| -> serde_json::Value {
        apply_events(extra)
            .into_iter()
            .find(|v| v["type"] == "change_summary" && v["operation"] == "plan")
            .expect("a plan summary event")
    };
    assert_eq!(plan_summary(&["--refresh=false"])["refreshed"], false);
    assert!(plan_summary(&[]).get("refreshed").is_none());

    let status: serde_json::Value =
        serde_json::from_str(&env.stdout(&["status", "--json"])).unwrap();
    let states: std::collections::BTreeMap<String, String> = status["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["address"].as_str().unwrap().to_string(),
                r["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(states["worker.agg[0].node[0]"], "healthy");
    assert_eq!(states["router[0]"], "healthy");
    assert_eq!(states["gate.router"], "passed");
    let table = env.stdout(&["status", "local-agg"]);
    assert!(
        table.contains("RESOURCE") && table.contains("pid "),
        "{table}"
    );

    let list = env.stdout(&["list"]);
    assert!(
        list.lines()
            .any(|l| l.starts_with("local-agg") && l.contains("running")),
        "{list}"
    );

    let logs = env.stdout(&["logs", "local-agg", "worker.agg[0].node[0]", "--tail", "50"]);
    assert!(
        logs.contains("--- srt: starting worker.agg[0].node[0] ---"),
        "{logs}"
    );
    let missing = env.srt(&["logs", "local-agg", "worker.nope"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("resources with logs"));

    for format in ["text", "dot", "mermaid"] {
        let g = env.stdout(&["graph", "-f", recipe, "--format", format]);
        assert!(
            g.contains("worker.agg[0].node[0]") && g.contains("router[0]"),
            "{g}"
        );
    }
    // --quiet: the plan's counts and the summary, not the plan itself nor progress.
    let quiet = env.stdout(&[
        "apply",
        "-f",
        recipe,
        "--simulate",
        "--auto-approve",
        "--quiet",
        "--replace",
        "worker.agg[1].node[0]",
    ]);
    assert!(!quiet.contains("will perform"), "{quiet}");
    assert!(!quiet.contains(": starting"), "{quiet}");
    assert!(quiet.starts_with("Plan: 0 to create,"), "{quiet}");
    assert!(quiet.contains("Apply complete"), "{quiet}");
    // Destroy stops the Router first (it depends on the workers), then both workers
    // together: each is asked to stop before either has finished stopping.
    let out = env.stdout(&["destroy", "local-agg", "--auto-approve"]);
    let line = |text: &str| {
        out.lines()
            .position(|l| l == text)
            .unwrap_or_else(|| panic!("no `{text}` in:\n{out}"))
    };
    let router_done = out
        .lines()
        .position(|l| l.starts_with("router[0]: destroyed"))
        .unwrap_or_else(|| panic!("{out}"));
    let workers_started = [0, 1].map(|w| line(&format!("worker.agg[{w}].node[0]: stopping...")));
    let first_worker_done = out
        .lines()
        .position(|l| l.starts_with("worker.agg[") && l.contains(": destroyed"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        router_done < workers_started[0].min(workers_started[1]),
        "{out}"
    );
    assert!(
        workers_started[0].max(workers_started[1]) < first_worker_done,
        "{out}"
    );
    // An emptied deployment is listed only with --all.
    let list = env.stdout(&["list", "--json"]);
    assert!(!list.contains("\"state\": \"empty\""), "{list}");
    let list = env.stdout(&["list", "--all", "--json"]);
    assert!(list.contains("\"state\": \"empty\""), "{list}");
}
