//! `srt status`, `srt list`, `srt logs`: read-only views of deployments on this machine.

use crate::{CmdResult, Done, ExpectedError};
use srt::state::StateStore;
use srt::workflow::status::{self, ResourceStatus};
use std::io::IsTerminal;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::time::Duration;

/// The state directory option shared by read-only commands.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct StateDir {
    /// Directory holding deployment state (`<dir>/<name>/state.json`).
    #[arg(long, env = "SRT_STATE_DIR", default_value = ".srt")]
    pub state_dir: PathBuf,
}

/// Arguments of `srt status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Deployment (default: the only one under the state directory).
    #[arg(value_parser = crate::deployment_name)]
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
    /// Also list deployments with nothing recorded (destroyed, or never applied); their
    /// directories keep the logs of earlier runs.
    #[arg(long)]
    all: bool,
}

/// Arguments of `srt logs`.
#[derive(Debug, clap::Args)]
pub struct LogsArgs {
    /// Deployment.
    #[arg(value_parser = crate::deployment_name)]
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

pub(crate) fn pick(dir: &StateDir, name: Option<String>) -> Result<String, ExpectedError> {
    if let Some(n) = name {
        return Ok(n);
    }
    let all = status::deployments(&dir.state_dir);
    match all.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(ExpectedError::NotFound(format!(
            "no deployments under {}",
            dir.state_dir.display()
        ))),
        many => Err(ExpectedError::Usage(format!(
            "several deployments under {}; name one: {}",
            dir.state_dir.display(),
            many.join(", ")
        ))),
    }
}

pub(crate) fn load(
    dir: &StateDir,
    name: &str,
) -> Result<(StateStore, srt::state::State), ExpectedError> {
    let store = StateStore::new(dir.state_dir.join(name));
    match store.load()? {
        Some(s) => Ok((store, s)),
        None => Err(ExpectedError::NotFound(format!(
            "no deployment `{name}` under {}",
            dir.state_dir.display()
        ))),
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
pub(crate) fn status(args: StatusArgs) -> CmdResult {
    let name = pick(&args.dir, args.name)?;
    let (store, state) = load(&args.dir, &name)?;
    // The executor that recorded the state (SLURM state is read from the scheduler).
    let exec = srt::workflow::executor_for_state(Default::default(), &name, store.dir(), &state);
    srt::workflow::restore(&*exec, &state)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let rows: Vec<ResourceStatus> = rt.block_on(status::status(&state, &*exec));
    if args.json {
        let mut doc =
            serde_json::json!({"deployment": name, "serial": state.serial, "resources": rows});
        if let Some(identity) = &state.identity {
            doc["identity"] = identity.clone();
        }
        say_exact!("{}", serde_json::to_string_pretty(&doc).expect("json"));
        return Ok(Done::Ok);
    }
    let mut t = vec![[
        "RESOURCE", "KIND", "NODE", "PORTS", "RUNTIME", "STATE", "AGE",
    ]
    .map(String::from)
    .to_vec()];
    for r in &rows {
        t.push(vec![
            r.address.clone(),
            r.kind.to_string(),
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
            r.age_secs.map_or_else(|| "-".into(), status::human_age),
        ]);
    }
    say!("deployment {name} (state serial {})", state.serial);
    if let Some(identity) = identity_line(&state) {
        say!("identity: {identity}");
    }
    say_raw!("{}", table(&t));
    for r in rows.iter().filter(|r| r.error.is_some()) {
        say!(
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
    Ok(Done::Ok)
}

/// Run `srt list`.
pub(crate) fn list(args: ListArgs) -> CmdResult {
    let mut rows = Vec::new();
    let mut hidden = 0;
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
                    .filter(|r| r.status == srt::state::Status::Failed)
                    .count();
                let exec =
                    srt::workflow::executor_for_state(Default::default(), &name, store.dir(), &s);
                let _ = srt::workflow::restore(&*exec, &s);
                let running = srt::workflow::refresh(&s, &*exec, None)
                    .values()
                    .filter(|o| o.is_alive())
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
        if state == "empty" && !args.all {
            hidden += 1;
            continue;
        }
        rows.push(serde_json::json!({"name": name, "state": state, "resources": resources, "processes_running": running, "failed": failed, "locked": lock}));
    }
    if args.json {
        say_exact!("{}", serde_json::to_string_pretty(&rows).expect("json"));
        return Ok(Done::Ok);
    }
    let hidden_note = match hidden {
        0 => String::new(),
        1 => "; 1 empty deployment not shown (`srt list --all` shows it)".to_string(),
        n => format!("; {n} empty deployments not shown (`srt list --all` shows them)"),
    };
    if rows.is_empty() {
        say!(
            "No deployments under {}{hidden_note}.",
            args.dir.state_dir.display()
        );
        return Ok(Done::Ok);
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
    say_raw!("{}", table(&t));
    if hidden > 0 {
        say!("({})", &hidden_note[2..]);
    }
    Ok(Done::Ok)
}

/// Run `srt logs`.
pub(crate) fn logs(args: LogsArgs) -> CmdResult {
    let (store, state) = load(&args.dir, &args.name)?;
    let Some(path) = status::log_path(&store, &state, &args.resource) else {
        let known: Vec<&String> = state
            .resources
            .iter()
            .filter(|(_, r)| r.log_path.is_some())
            .map(|(a, _)| a)
            .collect();
        return Err(ExpectedError::NotFound(format!(
            "no log for `{}` in deployment `{}`; resources with logs: {}",
            args.resource,
            args.name,
            known
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    let mut stdout = std::io::stdout().lock();
    // A log is the program's output, not terminal control: on a terminal its colours
    // stay and anything else (titles, cursor moves, clears) is escaped; into a pipe or
    // a file it is plain text.
    let clean: fn(&str) -> std::borrow::Cow<'_, str> = if std::io::stdout().is_terminal() {
        srt::term::keep_colours
    } else {
        srt::term::strip_ansi
    };
    // Only whole lines are cleaned and written, so an escape sequence or a character cut
    // by a read boundary is completed first.
    let mut carry: Vec<u8> = Vec::new();
    let mut write = |bytes: &[u8], carry: &mut Vec<u8>, flush_all: bool| -> bool {
        carry.extend_from_slice(bytes);
        let upto = if flush_all {
            carry.len()
        } else {
            match carry.iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                None => return true,
            }
        };
        let text = String::from_utf8_lossy(&carry[..upto]).into_owned();
        carry.drain(..upto);
        let ok = stdout.write_all(clean(&text).as_bytes()).is_ok();
        let _ = stdout.flush();
        ok
    };
    let mut offset = match args.tail {
        Some(n) => {
            let text = srt::exec::process::tail_file(&path, n).unwrap_or_default();
            if !write(text.as_bytes(), &mut carry, false) {
                return Ok(Done::Ok);
            }
            std::fs::metadata(&path).map_or(0, |m| m.len())
        }
        None => 0,
    };
    loop {
        if let Ok(mut f) = srt::files::open_read(&path) {
            let len = f.metadata().map_or(0, |m| m.len());
            if len < offset {
                offset = 0; // truncated or replaced
            }
            if len > offset && f.seek(SeekFrom::Start(offset)).is_ok() {
                let mut buf = Vec::new();
                let _ = f.take(len - offset).read_to_end(&mut buf);
                offset += buf.len() as u64;
                if !write(&buf, &mut carry, false) {
                    return Ok(Done::Ok); // closed pipe
                }
            }
        }
        if !args.follow {
            write(&[], &mut carry, true);
            return Ok(Done::Ok);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The identity the last apply recorded, on one line (`model=org/name@rev image=...`);
/// a recorded value srt cannot read is shown as the JSON it is.
fn identity_line(state: &srt::state::State) -> Option<String> {
    let value = state.identity.as_ref()?;
    Some(
        match serde_json::from_value::<srt::recipe::runtime::Identity>(value.clone()) {
            Ok(identity) => srt::term::escape_line(&identity.describe()).into_owned(),
            Err(_) => value.to_string(),
        },
    )
}
