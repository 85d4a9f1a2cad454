//! Every command srt renders for the examples (what `golden/` shows) is read back the
//! way the real program reads it: each by the flag catalog of its program (every engine
//! and frontend in the tables brings one, taken from the program's own parser), Router
//! lines also by the real Routers' parsers (the pinned releases the test command
//! installs). With `SRT_REAL_VLLM=1` and the opt-in vLLM venv (`scripts/install-vllm.sh`),
//! `vllm serve` lines go through vLLM's own parser too.

mod common;

use srt::catalog::Catalog;
use srt::launch::{HostLayout, LaunchProcess, ProcessKind};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Every program's catalog: the engines' (those with flags of their own) and the
/// frontends'.
fn catalogs() -> Vec<&'static Catalog> {
    let engines = srt::engine::ENGINES
        .iter()
        .filter_map(|e| e.catalog(None).ok());
    let frontends = srt::frontend::FRONTENDS
        .iter()
        .flat_map(|f| f.program_catalogs());
    engines.chain(frontends).collect()
}

/// A runtime wrapper's command (`python3 -m dynamo.vllm`): its own parser takes the
/// flags it knows and leaves the rest to the engine's, so each part is read by its
/// catalog. `None` for a program that reads every flag itself.
fn wrapper_parts(c: &Catalog, words: &[String]) -> Option<(Vec<String>, Vec<String>)> {
    use srt::catalog::{Arity, Resolution};
    if !c.program.starts_with("dynamo-")
        || c.program == "dynamo-frontend"
        || c.program == "dynamo-mocker"
    {
        return None;
    }
    let (mut own, mut rest) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < words.len() {
        let Some(name) = words[i].strip_prefix("--") else {
            rest.push(words[i].clone());
            i += 1;
            continue;
        };
        let name = name.split('=').next().unwrap_or_default();
        let taken = match c.resolve(name) {
            Resolution::Exact(o, _) if !words[i].contains('=') => match o.arity() {
                Arity::Zero => 1,
                _ => 2,
            },
            Resolution::Exact(..) => 1,
            _ => 0,
        };
        if taken > 0 {
            own.extend(words[i..(i + taken).min(words.len())].iter().cloned());
            i += taken;
        } else {
            rest.push(words[i].clone());
            i += 1;
        }
    }
    Some((own, rest))
}

/// The catalog of the engine whose runtime wrapper `wrapper` is the catalog of (what
/// the wrapper's parser leaves is that engine's); `None` for an engine that takes no
/// flags (it reads a config file), whose wrapper must be left nothing.
fn wrapped_engine(wrapper: &Catalog) -> Option<&'static Catalog> {
    let runtimes: Vec<&str> = srt::frontend::FRONTENDS
        .iter()
        .filter_map(|f| f.worker_runtime())
        .collect();
    srt::engine::ENGINES
        .iter()
        .find(|e| {
            runtimes.iter().any(|r| {
                e.runtime_wrapper(r)
                    .is_ok_and(|p| p.iter().eq(&wrapper.command))
            })
        })
        .unwrap_or_else(|| panic!("no engine runs {:?}", wrapper.command))
        .catalog(None)
        .ok()
}

fn catalog(program: &str) -> &'static Catalog {
    catalogs()
        .into_iter()
        .find(|c| c.program == program)
        .unwrap_or_else(|| panic!("no catalog for {program}"))
}

/// The catalog whose command `p` runs, and the words after the command prefix.
fn parsed_by(p: &LaunchProcess) -> Option<(&'static Catalog, Vec<String>)> {
    let argv = p.argv.to_vec();
    catalogs().into_iter().find_map(|c| {
        let prefix = &c.command;
        (argv.len() >= prefix.len() && argv[..prefix.len()] == prefix[..])
            .then(|| (c, argv[prefix.len()..].to_vec()))
    })
}

/// Every process of every example, on both host layouts (ports differ).
fn processes() -> Vec<(String, LaunchProcess)> {
    let mut out = Vec::new();
    for path in common::examples() {
        for layout in [HostLayout::Shared, HostLayout::Distinct] {
            let plan = common::plan_with(&path, None, layout);
            for p in plan.processes {
                let name = format!("{} ({layout:?})", path.display());
                // What runs in its place under `--simulate` (a runtime's simulated
                // engine) is a real program's command too.
                if let Some(argv) = p.worker.as_ref().and_then(|w| w.simulated.clone()) {
                    let sim = LaunchProcess {
                        address: format!("{} (simulated)", p.address),
                        argv,
                        ..p.clone()
                    };
                    out.push((name.clone(), sim));
                }
                out.push((name, p));
            }
        }
    }
    out
}

#[test]
fn every_rendered_command_parses_with_the_programs_catalog() {
    let mut checked: BTreeMap<&str, usize> = BTreeMap::new();
    for (example, p) in processes() {
        if p.kind.name() == "nginx" {
            continue;
        }
        let (catalog, words) = parsed_by(&p).unwrap_or_else(|| {
            panic!(
                "{example} {}: no catalog knows the command {:?}",
                p.address, p.argv
            )
        });
        if let Some((own, rest)) = wrapper_parts(catalog, &words) {
            let Some(engine) = wrapped_engine(catalog) else {
                assert!(
                    rest.is_empty(),
                    "{example} {}: {} takes no engine flags, left {rest:?}",
                    p.address,
                    catalog.program
                );
                catalog.parse_argv(&own).unwrap_or_else(|e| {
                    panic!(
                        "{example} {}: {} would refuse it: {e}",
                        p.address, catalog.program
                    )
                });
                *checked.entry(catalog.program.as_str()).or_default() += 1;
                continue;
            };
            for (c, part) in [(catalog, own), (engine, rest)] {
                if let Err(e) = c.parse_argv(&part) {
                    panic!(
                        "{example} {}: {} would refuse {part:?}: {e}",
                        p.address, c.program
                    );
                }
            }
            *checked.entry(catalog.program.as_str()).or_default() += 1;
            continue;
        }
        if let Err(e) = catalog.parse_argv(&words) {
            panic!(
                "{example} {}: {} would refuse it: {e}\n{:?}",
                p.address, catalog.program, p.argv
            );
        }
        *checked.entry(catalog.program.as_str()).or_default() += 1;
    }
    // Every program has examples, and many of the engine's.
    for c in catalogs() {
        assert!(
            checked.get(c.program.as_str()).is_some_and(|&n| n >= 2),
            "{} checked {checked:?}",
            c.program
        );
    }
    assert!(checked["vllm"] > 20, "checked {checked:?}");
}

/// The catalog reader is not vacuous: what the programs refuse, it refuses.
#[test]
fn the_catalog_reader_refuses_what_the_programs_refuse() {
    let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
    let (vllm, router, sglang) = (
        || catalog("vllm"),
        || catalog("vllm-router"),
        || catalog("sglang-router"),
    );
    for (catalog, line, says) in [
        (vllm(), "/m --max-modl-len 8", "unrecognized"),
        (vllm(), "/m --enforce-eager yes", "unrecognized"),
        (vllm(), "/m --tensor-parallel-size two", "invalid int"),
        (vllm(), "/m --port", "expected one argument"),
        (
            vllm(),
            "/m extra-positional",
            "unrecognized arguments: extra-positional",
        ),
        (router(), "--policy fastest", "invalid choice"),
        (router(), "--worker_urls http://x:1", "unrecognized"),
        (sglang(), "--policy fastest", "invalid choice"),
        (sglang(), "--port eighty", "invalid int"),
    ] {
        let err = catalog.parse_argv(&argv(line)).unwrap_err();
        assert!(err.contains(says), "{line}: {err}");
    }
}

fn tools() -> PathBuf {
    std::env::var_os("SRT_TOOLS_DIR").map_or_else(|| common::root().join(".tools"), PathBuf::from)
}

/// Run the real program's parser (`scripts/check-with-real-programs.py`) on many
/// commands at once; one verdict per command.
fn real_check(python: &PathBuf, program: &str, commands: &[Vec<String>]) -> Vec<serde_json::Value> {
    let mut child = Command::new(python)
        .arg(common::root().join("scripts/check-with-real-programs.py"))
        .arg(program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    serde_json::to_writer(child.stdin.take().unwrap(), commands).unwrap();
    let out = child.wait_with_output().unwrap();
    let verdicts: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        verdicts.len(),
        commands.len(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    verdicts
}

/// The venv holding each Router, as the test command installs them.
const ROUTER_VENVS: &[(&str, &str)] = &[
    ("vllm-router", "router-venv"),
    ("sglang-router", "sglang-router-venv"),
    ("smg", "smg-venv"),
];

#[test]
fn every_rendered_router_command_parses_with_the_real_router() {
    let mut commands: BTreeMap<&str, Vec<(String, Vec<String>)>> = BTreeMap::new();
    for (example, p) in processes() {
        if p.kind.name() != "router" {
            continue;
        }
        let (catalog, words) = parsed_by(&p).unwrap();
        commands
            .entry(catalog.program.as_str())
            .or_default()
            .push((format!("{example} {}", p.address), words));
    }
    // The Routers, whose parsers are installed by the test command's default parts.
    for f in srt::frontend::FRONTENDS
        .iter()
        .filter(|f| f.admin().is_some())
    {
        let program = f.catalog().program.as_str();
        let venv = ROUTER_VENVS
            .iter()
            .find(|(p, _)| *p == program)
            .unwrap_or_else(|| panic!("no venv known for {program}"))
            .1;
        let python = tools().join(venv).join("bin/python");
        assert!(
            python.exists(),
            "the real {program} is not installed in {}: run scripts/install-deps.sh router (the test command does)",
            python.display()
        );
        let commands = &commands[program];
        let argvs: Vec<Vec<String>> = commands.iter().map(|(_, a)| a.clone()).collect();
        let verdicts = real_check(&python, program, &argvs);
        for ((what, argv), v) in commands.iter().zip(&verdicts) {
            assert_eq!(
                v["ok"], true,
                "{what}: {program} refuses {argv:?}: {}",
                v["error"]
            );
        }
        // Not vacuous: the real parser refuses a broken command.
        let bad = real_check(
            &python,
            program,
            &[vec!["--policy".into(), "fastest".into()]],
        );
        assert_eq!(bad[0]["ok"], false, "{program}");
    }
}

/// The engines' real parsers: the catalog's program, its venv, and the variable that
/// asks for it (each is a large opt-in install).
const ENGINE_VENVS: &[(&str, &str, &str, &str)] = &[
    (
        "vllm",
        "vllm-venv",
        "SRT_REAL_VLLM",
        "scripts/install-vllm.sh",
    ),
    (
        "sglang",
        "sglang-catalog-venv",
        "SRT_REAL_SGLANG",
        "scripts/install-sglang-catalog.sh",
    ),
];

#[test]
fn every_rendered_worker_command_parses_with_its_real_engine_when_installed() {
    let mut commands: BTreeMap<String, Vec<(String, Vec<String>)>> = BTreeMap::new();
    for (example, p) in processes() {
        if p.kind != ProcessKind::Worker {
            continue;
        }
        let (catalog, words) = parsed_by(&p).unwrap();
        commands
            .entry(catalog.program.clone())
            .or_default()
            .push((format!("{example} {}", p.address), words));
    }
    for (program, venv, asked, install) in ENGINE_VENVS {
        if std::env::var_os(asked).is_none() {
            eprintln!("{asked} is not set: the real {program} ({install}) not asked for");
            continue;
        }
        let python = tools().join(venv).join("bin/python");
        assert!(
            python.exists(),
            "{asked} is set but {} is missing: run {install}",
            python.display()
        );
        let commands = commands.get(*program).map_or(&[][..], Vec::as_slice);
        assert!(
            !commands.is_empty(),
            "no example renders a {program} worker"
        );
        let argvs: Vec<Vec<String>> = commands.iter().map(|(_, a)| a.clone()).collect();
        let verdicts = real_check(&python, program, &argvs);
        for ((what, argv), v) in commands.iter().zip(&verdicts) {
            assert_eq!(
                v["ok"], true,
                "{what}: {program} refuses {argv:?}: {}",
                v["error"]
            );
        }
        // Not vacuous: the real parser refuses a broken command.
        let bad = real_check(&python, program, &[vec!["--no-such-flag".into()]]);
        assert_eq!(bad[0]["ok"], false, "{program}");
        eprintln!(
            "{} {program} commands accepted by the real parser",
            commands.len()
        );
    }
}

/// Every engine config file the examples render (`golden/`) is one TensorRT-LLM's
/// schema accepts: no problem and no warning of the schema's on any of them.
#[test]
fn every_golden_engine_config_passes_the_llm_api_schema() {
    let mut files = 0;
    for path in common::examples() {
        let plan = common::plan_with(&path, None, HostLayout::Shared);
        files += plan.files.len();
        let flagged: Vec<_> = plan
            .warnings
            .iter()
            .filter(|w| w.code.starts_with("srt::recipe::trtllm"))
            .collect();
        assert!(flagged.is_empty(), "{}: {flagged:?}", path.display());
    }
    assert!(files >= 5, "{files} config files");
}
