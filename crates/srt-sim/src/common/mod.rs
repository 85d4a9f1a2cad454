//! The simulator core every engine's protocol module runs on: the process lifecycle (parse,
//! bind, start up, serve, stop on a signal or a fault knob), the knobs, log lines, port
//! binding, the scheduler, prompt counting and text generation, and OpenAI-shaped answers.
//! An engine module (`vllm`, `sglang`) brings only what its engine does differently: its
//! command line and refusals, which ports it binds, its HTTP routes and their shapes.

pub mod argparse;
pub(crate) mod http;
pub mod knobs;
pub(crate) mod log;
pub(crate) mod openai;
pub mod ports;
pub mod sched;
pub(crate) mod text;

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::SimError;
use knobs::Knobs;

/// Runs a simulator: `parse` reads the argv (after the program name) and the environment,
/// `run` serves; returns the exit code. `help` is printed when `parse` answers
/// [`SimError::Help`]. Builds its own tokio runtime.
pub(crate) fn main<C, F>(
    program: &'static str,
    help: &str,
    args: &[String],
    parse: impl FnOnce(&[String], &HashMap<String, String>) -> Result<C, SimError>,
    run: impl FnOnce(C) -> F,
) -> i32
where
    F: Future<Output = Result<i32, SimError>>,
{
    log::set_program(program);
    let env: HashMap<String, String> = std::env::vars().collect();
    let cfg = match parse(args, &env) {
        Ok(c) => c,
        Err(SimError::Help) => {
            println!("{help}");
            return 0;
        }
        Err(e) => {
            let kind = match e {
                SimError::Usage(_) => "usage",
                _ => "refused",
            };
            eprintln!("{program}: error ({kind}): {e}");
            return e.exit_code();
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{program}: error: cannot start the runtime: {e}");
            return 1;
        }
    };
    let code = rt.block_on(async {
        match run(cfg).await {
            Ok(code) => code,
            Err(e) => {
                log::error(&e.to_string());
                e.exit_code()
            }
        }
    });
    rt.shutdown_background();
    code
}

/// SIGTERM or SIGINT, once either arrived.
pub(crate) struct Stop(watch::Receiver<Option<&'static str>>);

impl Stop {
    /// Installs the handlers.
    pub(crate) fn install() -> Result<Stop, SimError> {
        let (tx, rx) = watch::channel::<Option<&'static str>>(None);
        let mut term = signal(SignalKind::terminate())
            .map_err(|e| SimError::Runtime(format!("cannot install a SIGTERM handler: {e}")))?;
        let mut int = signal(SignalKind::interrupt())
            .map_err(|e| SimError::Runtime(format!("cannot install a SIGINT handler: {e}")))?;
        tokio::spawn(async move {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            let _ = tx.send(Some(name));
        });
        Ok(Stop(rx))
    }

    /// Resolves with the signal's name once a stop has been requested.
    pub(crate) async fn requested(&mut self) -> &'static str {
        loop {
            if let Some(s) = *self.0.borrow_and_update() {
                return s;
            }
            if self.0.changed().await.is_err() {
                // The signal task is gone; never stop on its account.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// The startup delay (`SRT_SIM_STARTUP_DELAY_MS`): `None` once it is over, or the exit code
/// to end with now (a signal: 0; `SRT_SIM_EXIT_DURING_STARTUP`: its code, half-way).
pub(crate) async fn start_up(knobs: &Knobs, stop: &mut Stop, what: &str) -> Option<i32> {
    let delay = knobs.startup_delay;
    log::info(&format!("{what}; ready in {} ms", delay.as_millis()));
    let wait = match knobs.exit_during_startup {
        Some(_) => delay / 2,
        None => delay,
    };
    tokio::select! {
        s = stop.requested() => {
            log::info(&format!("received {s} during startup; exiting"));
            return Some(0);
        }
        _ = tokio::time::sleep(wait) => {}
    }
    let code = knobs.exit_during_startup?;
    log::error(&format!(
        "simulated failure during startup (SRT_SIM_EXIT_DURING_STARTUP): exiting with code {code}"
    ));
    Some(code)
}

/// An HTTP server running on its own task.
pub(crate) struct Server {
    task: JoinHandle<std::io::Result<()>>,
    quit: oneshot::Sender<()>,
}

impl Server {
    /// Serves `app` on `listener` until told to drain.
    pub(crate) fn start(listener: TcpListener, app: axum::Router) -> Server {
        // The server drains only when told, after the stop request was seen, so a signal
        // can never look like the server dying on its own.
        let (quit, quit_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = quit_rx.await;
                })
                .await
        });
        Server { task, quit }
    }
}

/// Serves until a signal (exit 0), `SRT_SIM_EXIT_AFTER_MS` past readiness (`ready_in` from
/// now; exit 1, an engine dying) or a server ending on its own (an error). A signal lets
/// in-flight responses finish, briefly.
pub(crate) async fn serve_until_stopped(
    knobs: &Knobs,
    stop: &mut Stop,
    mut servers: Vec<Server>,
    ready_in: Duration,
) -> Result<i32, SimError> {
    {
        let exit_after = async {
            match knobs.exit_after {
                Some(d) => tokio::time::sleep(ready_in + d).await,
                None => std::future::pending().await,
            }
        };
        let server_done = async {
            if servers.is_empty() {
                return std::future::pending().await;
            }
            let (r, _, _) =
                futures::future::select_all(servers.iter_mut().map(|s| &mut s.task)).await;
            r
        };
        tokio::select! {
            s = stop.requested() => {
                log::info(&format!("received {s}; shutting down"));
            }
            _ = exit_after => {
                log::error(
                    "simulated engine death (SRT_SIM_EXIT_AFTER_MS): EngineDeadError; exiting with code 1",
                );
                return Ok(1);
            }
            r = server_done => {
                return Err(SimError::Runtime(format!("the HTTP server stopped: {r:?}")));
            }
        }
    }
    for s in servers {
        let _ = s.quit.send(());
        let _ = tokio::time::timeout(Duration::from_secs(2), s.task).await;
    }
    Ok(0)
}

/// Logs the environment a simulator reads: values for the variables in `shown` and the
/// `SRT_SIM_*` knobs, names only for the rest of those starting with one of `prefixes`
/// (any may be a secret a recipe marks sensitive, which the simulator cannot know).
pub(crate) fn log_env(prefixes: &[&str], shown: &[&str]) {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| {
            k.starts_with("SRT_SIM_")
                || shown.contains(&k.as_str())
                || prefixes.iter().any(|p| k.starts_with(p))
        })
        .collect();
    env.sort();
    if env.is_empty() {
        return;
    }
    log::info(&format!(
        "environment: {}",
        env.iter()
            .map(
                |(k, v)| if shown.contains(&k.as_str()) || k.starts_with("SRT_SIM_") {
                    format!("{k}={v}")
                } else {
                    format!("{k}=(set)")
                }
            )
            .collect::<Vec<_>>()
            .join(" ")
    ));
}

/// Logs the flags a simulator parsed but does not model (`(name, value)`).
pub(crate) fn log_unmodelled<'a>(flags: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) {
    let flags: Vec<String> = flags
        .into_iter()
        .map(|(name, value)| match value {
            Some(v) => format!("--{name} {v}"),
            None => format!("--{name}"),
        })
        .collect();
    if !flags.is_empty() {
        log::info(&format!(
            "flags accepted without simulation: {}",
            flags.join(" ")
        ));
    }
}
