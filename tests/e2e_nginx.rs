//! `examples/multi-frontend.yaml` end to end: the real nginx (Debian's,
//! `scripts/install-deps.sh nginx`) on the head node's public port in front of one real
//! `vllm-router` per other node, simulated workers behind them. Completions go through
//! nginx and to each Router's own port; a session header keeps a session on one Router.

mod e2e_support;

use e2e_support::{serial, Env};
use std::path::Path;

/// The example (its model named `tiny`, a few nginx limits set), with its state under a
/// *relative* `--state-dir`: nginx
/// resolves a relative `-c` against its own prefix, so srt must hand it absolute paths.
#[test]
fn multi_frontend_example_serves_through_nginx_and_every_router() {
    let _g = serial();
    let env = Env::new();
    let name = "e2e-multi-frontend";
    let mut text = e2e_support::example_named("multi-frontend.yaml", name);
    // The limits are the recipe's: a few set here must reach the running nginx.
    text = text.replace(
        "  args:\n    policy: cache_aware\n",
        "  args:\n    policy: cache_aware\n  nginx:\n    worker_processes: 2\n    worker_connections: 4096\n    upstream_keepalive: 64\n    session_header: X-Session-Id\n",
    );
    // The completion helper asks for the model `tiny`.
    text.push_str("model:\n  path: /models/tiny\n  served_name: tiny\n");
    assert!(text.contains("worker_processes: 2"), "{text}");
    let recipe = env.recipe("multi.yaml", &text);
    let state_dir = "state/rel";
    let out = env.ok(&[
        "apply",
        "-f",
        &recipe,
        "--state-dir",
        state_dir,
        "--simulate",
        "--auto-approve",
    ]);
    assert!(
        out.contains("nginx: started")
            && out.contains("router[1]: started")
            && out.contains("gate.router: passed")
            && out.contains("smoke: passed"),
        "{out}"
    );
    let dir = env.dir.path().join(state_dir).join(name);
    let state = srt::state::StateStore::new(&dir).load().unwrap().unwrap();
    let state = serde_json::to_value(state).unwrap();

    // nginx was started with an absolute configuration path holding the recipe's limits.
    let nginx = &state["resources"]["nginx"];
    let argv: Vec<String> = serde_json::from_value(nginx["spec"]["argv"].clone()).unwrap();
    let conf_at = argv.iter().position(|a| a == "-c").unwrap() + 1;
    assert_eq!(
        argv[conf_at], "<run-dir>/nginx.conf",
        "the spec keeps the placeholder"
    );
    let pid = nginx["runtime"]["pid"].as_u64().unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    // nginx rewrites its title to "nginx: master process <argv joined by spaces>".
    let cmdline: Vec<String> = String::from_utf8_lossy(&cmdline)
        .replace('\0', " ")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let conf = cmdline
        .iter()
        .skip_while(|a| *a != "-c")
        .nth(1)
        .unwrap_or_else(|| panic!("no -c in {cmdline:?}"));
    assert!(Path::new(conf).is_absolute(), "{cmdline:?}");
    let conf_text = std::fs::read_to_string(conf).unwrap();
    for line in [
        "worker_processes 2;",
        "worker_connections 4096;",
        "worker_rlimit_nofile 8192;",
        "keepalive 64;",
        "hash $srt_session consistent;",
    ] {
        assert!(
            conf_text.contains(line),
            "no `{line}` in {conf}:\n{conf_text}"
        );
    }
    // Two worker processes under the master.
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    assert_eq!(children.split_whitespace().count(), 2, "{children:?}");

    // Through nginx, and to each Router on its own internal port.
    for _ in 0..6 {
        let v = env.completion("http://127.0.0.1:8000");
        assert!(v["choices"][0]["text"].is_string(), "{v}");
    }
    for r in ["router[0]", "router[1]"] {
        let port = state["resources"][r]["ports"]["frontend_internal"]
            .as_u64()
            .unwrap_or_else(|| panic!("{r} has no internal port"));
        let v = env.completion(&format!("http://127.0.0.1:{port}"));
        assert!(v["choices"][0]["text"].is_string(), "{v}");
        let workers = env.get(&format!("http://127.0.0.1:{port}/workers"));
        assert_eq!(workers["stats"]["regular_count"], 6, "{r}: {workers}");
    }

    // Session affinity: every request of a session reaches one Router (counted by each
    // Router's own `vllm_router_requests_total`); requests without the header spread.
    let routers = ["router[0]", "router[1]"];
    let served = || -> Vec<u64> {
        routers
            .iter()
            .map(|r| {
                let port = state["resources"][*r]["ports"]["router_metrics"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("{r} has no metrics port"));
                env.in_netns(|| requests_total(&format!("http://127.0.0.1:{port}/metrics")))
            })
            .collect()
    };
    for session in ["s-1", "s-2", "s-3"] {
        let before = served();
        for _ in 0..8 {
            env.in_netns(|| completion_with("http://127.0.0.1:8000", Some(session)));
        }
        let after = served();
        let delta: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        assert!(delta == [8, 0] || delta == [0, 8], "{session}: {delta:?}");
    }
    let before = served();
    for _ in 0..24 {
        env.in_netns(|| completion_with("http://127.0.0.1:8000", None));
    }
    let after = served();
    assert!(
        after.iter().zip(&before).all(|(a, b)| a > b),
        "requests without a session reach both Routers: {before:?} -> {after:?}"
    );

    let again = env.ok(&[
        "apply",
        "-f",
        &recipe,
        "--state-dir",
        state_dir,
        "--simulate",
        "--auto-approve",
    ]);
    assert!(again.contains("No changes."), "{again}");
    let out = env.ok(&["destroy", name, "--state-dir", state_dir, "--auto-approve"]);
    assert!(out.contains("Destroy complete"), "{out}");
    e2e_support::wait_for("every process of the deployment to exit", || {
        e2e_support::live_processes(name).is_empty()
    });
}

/// A completion through `url`, in the session `session` (the `X-Session-Id` header)
/// when given; it must succeed.
fn completion_with(url: &str, session: Option<&str>) {
    let body = serde_json::json!({"model": "tiny", "prompt": "hello", "max_tokens": 4});
    e2e_support::with_client(|c| async move {
        let mut request = c.post(format!("{url}/v1/completions")).json(&body);
        if let Some(s) = session {
            request = request.header("X-Session-Id", s);
        }
        let r = request.send().await.unwrap();
        assert!(r.status().is_success(), "completion failed: {}", r.status());
    });
}

/// The sum of a Router's `vllm_router_requests_total` samples at `url`.
fn requests_total(url: &str) -> u64 {
    let text = e2e_support::with_client(|c| async move {
        c.get(url).send().await.unwrap().text().await.unwrap()
    });
    text.lines()
        .filter(|l| l.starts_with("vllm_router_requests_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}
