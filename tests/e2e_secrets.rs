//! Secrets, injection and file permissions, end to end on the local executor.
//!
//! - A sensitive env value never appears in `srt render` (text or JSON), `srt plan`
//!   (text or JSON), srt's output, the state, its backup, the lock or any log under
//!   the deployment directory; the state keeps a digest. It reaches the process through
//!   its environment and never through its command line. Changing it replaces the
//!   processes that use it.
//! - Recipe args and env values full of shell syntax reach the process byte for byte,
//!   and nothing is ever run by a shell.
//! - State, backup, lock, saved plans and logs are owner-only.

mod e2e_support;

use e2e_support::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const HF: &str = "hf_s3cr3tValue0001";
const HF_NEW: &str = "hf_s3cr3tValue0002";
const VLLM_KEY: &str = "sk-vllm-s3cr3t-0003";
const ROUTER: &str = "router-s3cr3t-0004";
/// Marked sensitive by the recipe (`sensitive_env`), not by its name.
const DB: &str = "postgres://srt:pw-s3cr3t-0005@db/x";

fn secrets_recipe(hf: &str) -> String {
    format!(
        "\
name: hard-secrets
sensitive_env: [DATABASE_URL]
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: 2
frontend:
  enable_multiple_frontends: false
  env:
    ROUTER_API_TOKEN: \"{ROUTER}\"
roles:
  agg:
    nodes: 1
    workers: 2
    env:
      HF_TOKEN: \"{hf}\"
      VLLM_API_KEY: \"{VLLM_KEY}\"
      DATABASE_URL: \"{DB}\"
      PYTHONUNBUFFERED: \"1\"
health_check:
  timeout_seconds: 60
"
    )
}

fn assert_hidden(what: &str, text: &str, secrets: &[&str]) {
    for s in secrets {
        assert!(!text.contains(s), "{what} shows a secret:\n{text}");
    }
}

fn proc_strings(pid: u32, file: &str) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/{file}"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// Every file under the state directory is owner-only, and so is the deployment dir.
fn assert_private(env: &Env, deployment: &str) {
    let root = env.dir.path().join(".srt");
    assert_eq!(mode(&root), 0o700, ".srt");
    assert_eq!(
        mode(&env.deployment_dir(deployment)),
        0o700,
        "deployment dir"
    );
    let files = files_under(&root);
    assert!(
        files.iter().any(|f| f.ends_with("state.json"))
            && files.iter().any(|f| f.ends_with("state.json.backup"))
            && files.iter().any(|f| f.ends_with("lock"))
            && files
                .iter()
                .any(|f| f.extension().is_some_and(|e| e == "log")),
        "{files:?}"
    );
    for f in files {
        assert_eq!(mode(&f), 0o600, "{} is not owner-only", f.display());
    }
}

#[test]
fn secrets_stay_out_of_output_state_logs_and_command_lines() {
    let _g = serial();
    let env = Env::new();
    let all = [HF, HF_NEW, VLLM_KEY, ROUTER, DB];
    let recipe = env.recipe("secrets.yaml", &secrets_recipe(HF));

    let render = env.ok(&["render", "-f", &recipe]);
    assert_hidden("srt render", &render, &all);
    assert!(
        render.contains("HF_TOKEN=(sensitive)") && render.contains("DATABASE_URL=(sensitive)"),
        "{render}"
    );
    let render_json = env.ok(&["render", "-f", &recipe, "--json"]);
    assert_hidden("srt render --json", &render_json, &all);
    let plan = env.ok(&["plan", "-f", &recipe, "--simulate"]);
    assert_hidden("srt plan", &plan, &all);
    let plan_json = env.ok(&["plan", "-f", &recipe, "--simulate", "--json"]);
    assert_hidden("srt plan --json", &plan_json, &all);
    // A saved plan embeds the recipe (and so its secrets) to re-apply it exactly:
    // owner-only, like state.
    env.ok(&["plan", "-f", &recipe, "--simulate", "-o", "saved.plan"]);
    assert_eq!(mode(&env.dir.path().join("saved.plan")), 0o600);

    let out = env.apply(&recipe);
    assert_hidden("srt apply", &out, &all);
    let state_text = std::fs::read_to_string(env.state_path("hard-secrets")).unwrap();
    assert!(
        state_text.contains("\"HF_TOKEN\":\"blake3:")
            && state_text.contains("\"DATABASE_URL\":\"blake3:"),
        "{state_text}"
    );
    for f in files_under(&env.dir.path().join(".srt")) {
        let bytes = std::fs::read(&f).unwrap();
        assert_hidden(
            &f.display().to_string(),
            &String::from_utf8_lossy(&bytes),
            &all,
        );
    }
    assert_private(&env, "hard-secrets");

    // The values reach the processes through their environment only. (The Router
    // retitles itself, overwriting what /proc shows of its argv and environment: its
    // command line is checked as srt recorded it; the environment mechanism is the same
    // for every process and is checked on the workers.)
    let state = env.state("hard-secrets");
    for (address, r) in state["resources"].as_object().unwrap() {
        let Some(pid) = r["runtime"]["pid"].as_u64() else {
            continue;
        };
        let pid = pid as u32;
        assert_hidden(
            &format!("{address} recorded argv"),
            &r["spec"]["argv"].to_string(),
            &all,
        );
        if r["kind"] != "worker" {
            continue;
        }
        let cmdline = proc_strings(pid, "cmdline");
        assert!(
            cmdline.iter().any(|a| a == "serve"),
            "{address}: {cmdline:?}"
        );
        assert_hidden(&format!("{address} command line"), &cmdline.join(" "), &all);
        let environ = proc_strings(pid, "environ");
        for e in [
            format!("HF_TOKEN={HF}"),
            format!("VLLM_API_KEY={VLLM_KEY}"),
            format!("DATABASE_URL={DB}"),
        ] {
            assert!(
                environ.contains(&e),
                "{address}: {e} not in its environment"
            );
        }
    }

    // A changed secret replaces the workers that use it, without showing either value.
    let workers = [
        env.pid("hard-secrets", "worker.agg[0].node[0]"),
        env.pid("hard-secrets", "worker.agg[1].node[0]"),
    ];
    std::fs::write(&recipe, secrets_recipe(HF_NEW)).unwrap();
    let plan = env.ok(&["plan", "-f", &recipe, "--simulate"]);
    assert_hidden("srt plan after a secret change", &plan, &all);
    assert!(
        plan.contains("# worker.agg[0].node[0] will be replaced")
            && plan.contains("# worker.agg[1].node[0] will be replaced")
            && plan.contains("its spec changed: env.HF_TOKEN"),
        "{plan}"
    );
    let plan_json = env.ok(&["plan", "-f", &recipe, "--simulate", "--json"]);
    assert_hidden("srt plan --json after a secret change", &plan_json, &all);
    let out = env.apply(&recipe);
    assert_hidden("srt apply after a secret change", &out, &all);
    for (i, old) in workers.iter().enumerate() {
        let now = env.pid("hard-secrets", &format!("worker.agg[{i}].node[0]"));
        assert_ne!(now, *old, "worker {i} kept running with the old secret");
        assert!(proc_strings(now, "environ").contains(&format!("HF_TOKEN={HF_NEW}")));
    }
    for f in files_under(&env.dir.path().join(".srt")) {
        let bytes = std::fs::read(&f).unwrap();
        assert_hidden(
            &f.display().to_string(),
            &String::from_utf8_lossy(&bytes),
            &all,
        );
    }
    assert_private(&env, "hard-secrets");
    env.destroy("hard-secrets");
}

#[test]
fn shell_syntax_in_args_and_env_reaches_the_process_verbatim() {
    let _g = serial();
    let env = Env::new();
    let d = env.dir.path().display().to_string();
    let evil = format!(
        "it's \"quoted\" $(touch {d}/p1) `touch {d}/p2` ; touch {d}/p3 && touch {d}/p4 | tee {d}/p5 > {d}/p6\nsecond line \\ $HOME ${{PATH}} * ~ #"
    );
    let evil2 = format!("';touch {d}/p7;'\"; touch {d}/p8; \"\n$(touch {d}/p9)");
    // JSON strings are YAML double-quoted scalars: the exact bytes go through.
    let q = |s: &str| serde_json::to_string(s).unwrap();
    let recipe_text = format!(
        "\
name: hard-inject
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: 1
frontend:
  enable_multiple_frontends: false
  env:
    INJECTED: {e}
roles:
  agg:
    nodes: 1
    workers: 1
    args:
      chat-template: {e}
      revision: {e2}
    env:
      INJECTED: {e}
      INJECTED_TOO: {e2}
health_check:
  timeout_seconds: 60
",
        e = q(&evil),
        e2 = q(&evil2)
    );
    let recipe = env.recipe("inject.yaml", &recipe_text);

    // The launch plan carries the values as single argv tokens.
    let rendered = env.srt(&["render", "-f", &recipe, "--json"]);
    assert!(rendered.status.success(), "{}", text(&rendered));
    let launch: serde_json::Value = serde_json::from_slice(&rendered.stdout).unwrap();
    let worker = &launch["processes"][0];
    let argv: Vec<&str> = worker["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let after = |flag: &str| argv[argv.iter().position(|a| *a == flag).unwrap() + 1];
    assert_eq!(after("--chat-template"), evil);
    assert_eq!(after("--revision"), evil2);

    let out = env.apply(&recipe);
    assert!(out.contains("smoke: passed"), "{out}");
    let pid = env.pid("hard-inject", "worker.agg[0].node[0]");
    let cmdline = proc_strings(pid, "cmdline");
    let at = |flag: &str| cmdline[cmdline.iter().position(|a| a == flag).unwrap() + 1].clone();
    assert_eq!(at("--chat-template"), evil);
    assert_eq!(at("--revision"), evil2);
    let environ = proc_strings(pid, "environ");
    assert!(environ.contains(&format!("INJECTED={evil}")), "{environ:?}");
    assert!(
        environ.contains(&format!("INJECTED_TOO={evil2}")),
        "{environ:?}"
    );
    for i in 1..=9 {
        assert!(
            !env.dir.path().join(format!("p{i}")).exists(),
            "p{i} was created: a value reached a shell"
        );
    }
    env.destroy("hard-inject");
}
