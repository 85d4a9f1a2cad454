//! `srt status`, `srt list`, `srt logs`: read-only views of deployments on this machine.

use super::report;
use crate::exit;
use crate::ops::status::{self, ResourceStatus};
use crate::state::StateStore;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::time::Duration;

/// The state directory option shared by read-only commands.
#[derive(Debug, Clone, clap::Args)]
pub struct StateDir {
    /// Directory holding deployment state (`<dir>/<name>/state.json`).
    #[arg(long, env = "SRT_STATE_DIR", default_value = ".srt")]
    pub state_dir: PathBuf,
}

/// Arguments of `srt status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Deployment (default: the only one under the state directory).
    name: Option<String>,
    #[command(flatten)]
    dir: StateDir,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `srt list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    dir: StateDir,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `srt logs`.
#[derive(Debug, clap::Args)]
pub struct LogsArgs {
    /// Deployment.
    name: String,
    /// Resource address, e.g. `worker.agg[0].node[0]` or `router[0]`.
    resource: String,
    #[command(flatten)]
    dir: StateDir,
    /// Keep printing as the log grows (Ctrl-C to stop).
    #[arg(short, long)]
    follow: bool,
    /// Only the last N lines.
    #[arg(long, value_name = "N")]
    tail: Option<usize>,
}

fn pick(dir: &StateDir, name: Option<String>) -> Result<String, i32> {
    if let Some(n) = name {
        return Ok(n);
    }
    let all = status::deployments(&dir.state_dir);
    match all.as_slice() {
        [one] => Ok(one.clone()),
        [] => {
            eprintln!("error: no deployments under {}", dir.state_dir.display());
            Err(exit::ERROR)
        }
        many => {
            eprintln!(
                "error: several deployments under {}; name one: {}",
                dir.state_dir.display(),
                many.join(", ")
            );
            Err(exit::USAGE)
        }
    }
}

fn load(dir: &StateDir, name: &str) -> Result<(StateStore, crate::state::State), i32> {
    let store = StateStore::new(dir.state_dir.join(name));
    match store.load() {
        Ok(Some(s)) => Ok((store, s)),
        Ok(None) => {
            eprintln!(
                "error: no deployment `{name}` under {}",
                dir.state_dir.display()
            );
            Err(exit::ERROR)
        }
        Err(e) => {
            report(&e);
            Err(exit::STATE)
        }
    }
}

fn table(rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// Run `srt status`.
pub fn status(args: StatusArgs) -> i32 {
    let name = match pick(&args.dir, args.name) {
        Ok(n) => n,
        Err(c) => return c,
    };
    let (store, state) = match load(&args.dir, &name) {
        Ok(x) => x,
        Err(c) => return c,
    };
    // The executor that recorded the state (SLURM state is read from the scheduler).
    let exec = crate::ops::executor_for_state(Default::default(), &name, store.dir(), &state);
    if let Err(e) = crate::ops::restore(&*exec, &state) {
        report(&e);
        return e.exit_code();
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let rows: Vec<ResourceStatus> = rt.block_on(status::status(&state, &*exec));
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"deployment": name, "serial": state.serial, "resources": rows})
            )
            .expect("json")
        );
        return exit::OK;
    }
    let mut t = vec![[
        "RESOURCE", "KIND", "NODE", "PORTS", "RUNTIME", "STATE", "AGE",
    ]
    .map(String::from)
    .to_vec()];
    for r in &rows {
        t.push(vec![
            r.address.clone(),
            r.kind.clone(),
            r.node.clone().unwrap_or_else(|| "-".into()),
            if r.ports.is_empty() {
                "-".into()
            } else {
                r.ports
                    .iter()
                    .map(|(k, p)| format!("{k}:{p}"))
                    .collect::<Vec<_>>()
                    .join(",")
            },
            r.runtime.clone().unwrap_or_else(|| "-".into()),
            r.state.clone(),
            r.age_secs
                .map(status::human_age)
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    println!("deployment {name} (state serial {})", state.serial);
    print!("{}", table(&t));
    for r in rows.iter().filter(|r| r.error.is_some()) {
        println!(
            "{}: {}",
            r.address,
            r.error
                .as_deref()
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or_default()
        );
    }
    exit::OK
}

/// Run `srt list`.
pub fn list(args: ListArgs) -> i32 {
    let mut rows = Vec::new();
    for name in status::deployments(&args.dir.state_dir) {
        let store = StateStore::new(args.dir.state_dir.join(&name));
        let (state, resources, running, failed) = match store.load() {
            Ok(Some(s)) => {
                let procs: Vec<_> = s
                    .resources
                    .values()
                    .filter(|r| r.runtime.is_some())
                    .collect();
                let failed = s
                    .resources
                    .values()
                    .filter(|r| r.status == crate::state::Status::Failed)
                    .count();
                let exec =
                    crate::ops::executor_for_state(Default::default(), &name, store.dir(), &s);
                let _ = crate::ops::restore(&*exec, &s);
                let running = procs
                    .iter()
                    .filter(|r| {
                        matches!(
                            r.runtime.as_ref().map(|rt| exec.observe(rt)),
                            Some(crate::plan::Observation::Alive)
                        )
                    })
                    .count();
                let state = if s.resources.is_empty() {
                    "empty"
                } else if failed > 0 {
                    "failed"
                } else if running < procs.len() {
                    "drifted"
                } else {
                    "running"
                };
                (state.to_string(), s.resources.len(), running, failed)
            }
            Ok(None) => ("missing".into(), 0, 0, 0),
            Err(_) => ("unreadable".into(), 0, 0, 0),
        };
        let lock = store
            .read_lock_info()
            .ok()
            .flatten()
            .filter(|l| l.holder_alive() == Some(true))
            .map(|l| format!("{} by pid {}", l.operation, l.pid));
        rows.push(serde_json::json!({"name": name, "state": state, "resources": resources, "processes_running": running, "failed": failed, "locked": lock}));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows).expect("json"));
        return exit::OK;
    }
    if rows.is_empty() {
        println!("No deployments under {}.", args.dir.state_dir.display());
        return exit::OK;
    }
    let mut t = vec![
        ["NAME", "STATE", "RESOURCES", "RUNNING", "FAILED", "LOCKED"]
            .map(String::from)
            .to_vec(),
    ];
    for r in &rows {
        t.push(vec![
            r["name"].as_str().unwrap_or_default().to_string(),
            r["state"].as_str().unwrap_or_default().to_string(),
            r["resources"].to_string(),
            r["processes_running"].to_string(),
            r["failed"].to_string(),
            r["locked"].as_str().unwrap_or("-").to_string(),
        ]);
    }
    print!("{}", table(&t));
    exit::OK
}

/// Run `srt logs`.
pub fn logs(args: LogsArgs) -> i32 {
    let (store, state) = match load(&args.dir, &args.name) {
        Ok(x) => x,
        Err(c) => return c,
    };
    let Some(path) = status::log_path(&store, &state, &args.resource) else {
        let known: Vec<&String> = state
            .resources
            .iter()
            .filter(|(_, r)| r.log_path.is_some())
            .map(|(a, _)| a)
            .collect();
        eprintln!(
            "error: no log for `{}` in deployment `{}`; resources with logs: {}",
            args.resource,
            args.name,
            known
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return exit::ERROR;
    };
    let mut stdout = std::io::stdout().lock();
    let mut offset = match args.tail {
        Some(n) => {
            let text = crate::exec::process::tail_file(&path, n).unwrap_or_default();
            let _ = stdout.write_all(text.as_bytes());
            std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0)
        }
        None => 0,
    };
    loop {
        if let Ok(mut f) = std::fs::File::open(&path) {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            if len < offset {
                offset = 0; // truncated or replaced
            }
            if len > offset && f.seek(SeekFrom::Start(offset)).is_ok() {
                let mut buf = Vec::new();
                let _ = f.take(len - offset).read_to_end(&mut buf);
                offset += buf.len() as u64;
                if stdout.write_all(&buf).is_err() {
                    return exit::OK; // closed pipe
                }
                let _ = stdout.flush();
            }
        }
        if !args.follow {
            return exit::OK;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
