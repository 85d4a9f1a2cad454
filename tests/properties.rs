//! Property tests over random valid topologies (proptest):
//!
//! - the port allocator never leases a port twice on a host (cluster and local
//!   layouts; on the local layout no port repeats at all);
//! - every rendered command line parses back (POSIX shell words, `shlex`) to exactly
//!   the process's argv, whatever the recipe's arg values contain;
//! - building, rendering and lowering are deterministic: twice the same recipe gives
//!   byte-identical text, JSON and resource hashes.

use proptest::prelude::*;
use proptest::test_runner::Config;
use srt::assemble::{assemble as build, BuildOptions};
use srt::launch::render::{command_line, quote};
use srt::launch::HostLayout;
use srt::launch::LaunchPlan;
use srt::recipe::{load_str, Source};

/// One role's shape: workers, GPUs per worker, data-parallel size (the rest is TP).
#[derive(Clone, Debug)]
struct RoleShape {
    workers: u32,
    gpus: u32,
    dp: u32,
    pp: u32,
}

#[derive(Clone, Debug)]
struct Topology {
    gpus_per_node: u32,
    /// `None`: aggregated (`agg` role only). `Some(colocate)`: prefill + decode.
    disagg: Option<bool>,
    roles: Vec<RoleShape>,
    multiple_frontends: bool,
    /// Recipe arg values (rendered as `--max-model-len`-free free-form flags).
    values: Vec<String>,
}

fn divisors(n: u32) -> Vec<u32> {
    (1..=n).filter(|d| n.is_multiple_of(*d)).collect()
}

fn role_shape(gpus_per_node: u32, small_only: bool) -> impl Strategy<Value = RoleShape> {
    // Packed workers (a divisor of a node) or, unless colocating, whole multi-node ones.
    let sizes: Vec<u32> = if small_only {
        divisors(gpus_per_node)
    } else {
        divisors(gpus_per_node)
            .into_iter()
            .chain([2 * gpus_per_node, 4 * gpus_per_node])
            .collect()
    };
    (prop::sample::select(sizes), 1u32..=4).prop_flat_map(|(gpus, workers)| {
        let dps = divisors(gpus);
        (prop::sample::select(dps), Just(gpus), Just(workers)).prop_flat_map(
            |(dp, gpus, workers)| {
                let pps = divisors(gpus / dp);
                (
                    prop::sample::select(pps),
                    Just(dp),
                    Just(gpus),
                    Just(workers),
                )
                    .prop_map(|(pp, dp, gpus, workers)| RoleShape {
                        workers,
                        gpus,
                        dp,
                        pp,
                    })
            },
        )
    })
}

/// Arg values with everything a shell would interpret.
fn hostile_value() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("'".to_string()),
            Just("\"".to_string()),
            Just("$(touch /tmp/x)".to_string()),
            Just("`id`".to_string()),
            Just("\n".to_string()),
            Just(";".to_string()),
            Just("\\".to_string()),
            Just("$HOME".to_string()),
            Just(" ".to_string()),
            Just("*".to_string()),
            Just("#".to_string()),
            Just("~".to_string()),
            Just("é€".to_string()),
            "[a-z0-9=,.:/_-]{1,6}",
        ],
        1..6,
    )
    .prop_map(|parts| parts.concat())
}

fn topology() -> impl Strategy<Value = Topology> {
    (
        prop::sample::select(vec![1u32, 2, 4, 8]),
        prop_oneof![Just(None), Just(Some(false)), Just(Some(true))],
        any::<bool>(),
        prop::collection::vec(hostile_value(), 0..3),
    )
        .prop_flat_map(|(gpn, disagg, multiple_frontends, values)| {
            let colocate = disagg == Some(true);
            let count = if disagg.is_some() { 2 } else { 1 };
            (
                Just(gpn),
                Just(disagg),
                prop::collection::vec(role_shape(gpn, colocate), count),
                Just(multiple_frontends),
                Just(values),
            )
        })
        .prop_map(
            |(gpus_per_node, disagg, roles, multiple_frontends, values)| Topology {
                gpus_per_node,
                disagg,
                roles,
                multiple_frontends,
                values,
            },
        )
}

/// Flags the engine passes through untouched: they carry the generated values.
const FREE_FORM_FLAGS: [&str; 3] = ["chat-template", "revision", "tokenizer"];

fn yaml_role(name: &str, nodes: &str, r: &RoleShape, values: &[String]) -> String {
    let mut args = Vec::new();
    if r.dp > 1 {
        args.push(format!("data-parallel-size: {}", r.dp));
    }
    if r.pp > 1 {
        args.push(format!("pipeline-parallel-size: {}", r.pp));
    }
    let tp = r.gpus / r.dp / r.pp;
    if tp > 1 {
        args.push(format!("tensor-parallel-size: {tp}"));
    }
    // Free-form values ride on flags the engine passes through untouched.
    for (flag, v) in FREE_FORM_FLAGS.iter().zip(values) {
        args.push(format!("{flag}: {}", serde_json::to_string(v).unwrap()));
    }
    format!(
        "  {name}:\n    nodes: {nodes}\n    workers: {}\n    gpus: {}\n    args: {{{}}}\n",
        r.workers,
        r.gpus,
        args.join(", ")
    )
}

fn nodes_for(r: &RoleShape, gpn: u32) -> u32 {
    (r.workers * r.gpus).div_ceil(gpn)
}

fn recipe_text(t: &Topology) -> String {
    let mut out = format!(
        "name: prop\nresources: {{gpus_per_node: {}}}\nfrontend: {{enable_multiple_frontends: {}}}\nroles:\n",
        t.gpus_per_node, t.multiple_frontends
    );
    let gpn = t.gpus_per_node;
    match t.disagg {
        None => {
            out += &yaml_role(
                "agg",
                &nodes_for(&t.roles[0], gpn).to_string(),
                &t.roles[0],
                &t.values,
            );
        }
        Some(colocate) => {
            let (p, d) = (&t.roles[0], &t.roles[1]);
            if colocate {
                out += &yaml_role("prefill", &nodes_for(p, gpn).to_string(), p, &t.values);
                out += &yaml_role("decode", "colocate", d, &t.values);
            } else {
                out += &yaml_role("prefill", &nodes_for(p, gpn).to_string(), p, &t.values);
                out += &yaml_role("decode", &nodes_for(d, gpn).to_string(), d, &t.values);
            }
        }
    }
    out
}

fn build_text(text: &str, hosts: HostLayout) -> Option<LaunchPlan> {
    let source = Source {
        name: "prop.yaml".into(),
        text: text.into(),
    };
    let recipe = load_str(&source, "prop").ok()?;
    build(&recipe, &BuildOptions { nodes: None, hosts }).ok()
}

fn overlap(a: &srt::ports::Lease, b: &srt::ports::Lease) -> bool {
    a.block.base <= b.block.last() && b.block.base <= a.block.last()
}

fn config() -> Config {
    Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(256),
        max_global_rejects: 100_000,
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn ports_are_never_leased_twice_on_a_host(t in topology()) {
        let text = recipe_text(&t);
        // Shapes a rule refuses (different node-local DP sizes behind one Router, say)
        // are not topologies; the generator keeps them rare.
        let built = build_text(&text, HostLayout::Distinct);
        prop_assume!(built.is_some());
        for layout in [HostLayout::Distinct, HostLayout::Shared] {
            let plan = build_text(&text, layout).expect("builds on both layouts");
            for (i, a) in plan.leases.iter().enumerate() {
                for b in &plan.leases[i + 1..] {
                    prop_assert!(
                        !(a.host == b.host && overlap(a, b)),
                        "{layout:?}: {a:?} and {b:?} overlap\n{text}"
                    );
                }
            }
            // Every port a process binds is leased to it.
            for p in &plan.processes {
                for block in p.ports.values() {
                    prop_assert!(plan.leases.iter().any(|l| l.block.base <= block.base
                        && block.last() <= l.block.last()), "{}: {block:?}\n{text}", p.address);
                }
            }
        }
    }

    #[test]
    fn rendered_commands_parse_back_to_the_argv(t in topology()) {
        let text = recipe_text(&t);
        let plan = build_text(&text, HostLayout::Distinct);
        prop_assume!(plan.is_some());
        let plan = plan.unwrap();
        for p in &plan.processes {
            let line = command_line(&p.argv);
            prop_assert_eq!(shlex::split(&line), Some(p.argv.to_vec()), "{}", line);
            // The per-flag lines of `srt render` are the same words.
            let lines = srt::launch::render::command_lines(&p.argv).join(" ");
            prop_assert_eq!(shlex::split(&lines), Some(p.argv.to_vec()));
        }
        // The values reach the argv whole, one token each: a word of their own, or
        // attached to their flag when they start with `-` (argparse would read a
        // separate `-...` word as an option).
        for (flag, v) in FREE_FORM_FLAGS.iter().zip(&t.values) {
            let word = if v.starts_with('-') { format!("--{flag}={v}") } else { v.clone() };
            prop_assert!(plan.processes.iter().any(|p| p.argv.contains(&word)), "{word:?}");
        }
    }

    #[test]
    fn building_rendering_and_hashing_are_deterministic(t in topology()) {
        let text = recipe_text(&t);
        let a = build_text(&text, HostLayout::Shared);
        prop_assume!(a.is_some());
        let a = a.unwrap();
        let b = build_text(&text, HostLayout::Shared).unwrap();
        prop_assert_eq!(srt::launch::render::render(&a), srt::launch::render::render(&b));
        prop_assert_eq!(srt::launch::render::json(&a), srt::launch::render::json(&b));
        let exec = serde_json::json!({"executor": "local", "simulate": true});
        let ga = srt::graph::lower(&a, &exec).unwrap();
        let gb = srt::graph::lower(&b, &exec).unwrap();
        let hashes = |g: &srt::graph::ResourceGraph| -> Vec<(String, String)> {
            g.resources.iter().map(|r| (r.address.clone(), r.hash.clone())).collect()
        };
        prop_assert_eq!(hashes(&ga), hashes(&gb));
    }

    #[test]
    fn any_token_quotes_to_one_shell_word(s in "[^\u{0}]{0,40}") {
        prop_assert_eq!(shlex::split(&quote(&s)), Some(vec![s.clone()]));
    }

    #[test]
    fn quoting_is_what_shlex_writes(
        s in prop_oneof![
            "[^\u{0}]{0,40}",
            "[a-z0-9<>'^\\\\ $\"`!é:/._=,-]{0,12}",
        ]
    ) {
        // Plans and golden files show quoted commands: the fast paths of `quote` must
        // write exactly shlex's bytes.
        let expected = shlex::try_quote(&s).unwrap().into_owned();
        prop_assert_eq!(quote(&s), expected);
    }
}

/// The generator is not vacuous: most topologies it draws are valid recipes.
#[test]
fn most_generated_topologies_are_valid() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = topology();
    let mut valid = 0;
    for _ in 0..200 {
        let t = strategy.new_tree(&mut runner).unwrap().current();
        if build_text(&recipe_text(&t), HostLayout::Distinct).is_some() {
            valid += 1;
        }
    }
    assert!(valid >= 100, "only {valid}/200 generated topologies build");
}
