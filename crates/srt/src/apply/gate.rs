//! Readiness gates: poll a probe with short adaptive intervals until it passes, the
//! recipe's timeout runs out, or a process of the deployment dies (then fail at once,
//! naming it and showing its log tail, and record it as failed).

use super::record::Recorder;
use super::{Apply, Event, StepError, StepResult};
use crate::launch::{Gate, Probe};
use crate::plan::Observation;
use crate::probe::REQUEST_TIMEOUT;
use crate::state::{Runtime, Status};
use std::time::{Duration, Instant};

/// First poll interval; grows x1.5 up to the cap.
const FIRST_INTERVAL: Duration = Duration::from_millis(20);
/// Longest wait between polls, whatever the recipe's interval: readiness is noticed
/// within 50 ms. A poll of something not listening yet is a refused connection, and a
/// poll that answers is one cheap GET; a round (probe and liveness checks) that takes
/// longer than the interval is followed by a pause as long as itself.
const MAX_INTERVAL: Duration = Duration::from_millis(50);

/// The gates' HTTP client. A completion (the smoke check, the benchmark's requests) may
/// take as long as the recipe's readiness budget (`health_check.timeout_seconds`):
/// a real engine's first request can take longer than any fixed timeout (over 5 s for
/// TP2 on CPU), and the gate stops waiting at its deadline anyway. Readiness requests
/// set [`REQUEST_TIMEOUT`] each.
fn client(budget: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(budget.max(REQUEST_TIMEOUT))
        .no_proxy()
        .build()
        .expect("http client")
}

/// Run a gate to completion.
pub(super) async fn run(apply: &Apply<'_>, rec: &Recorder<'_>, gate: &Gate) -> StepResult {
    let client = client(Duration::from_secs(apply.health.timeout_secs));
    let bindings = apply.exec.bindings();
    let resolve = |s: &str| bindings.resolve(s);
    let deadline = Instant::now() + Duration::from_secs(apply.health.timeout_secs);
    let cap = MAX_INTERVAL.min(Duration::from_secs(apply.health.interval_secs.max(1)));
    if let Probe::Benchmark(spec) = &gate.probe {
        // A load run happens once; retrying would hide failures.
        let spec = spec.resolved(resolve);
        return tokio::select! {
            r = benchmark(apply, gate, &spec) => Ok(r?),
            _ = apply.cancel.cancelled() => Err(interrupted(&spec).await.into()),
        };
    }
    if let Probe::Command(run) = &gate.probe {
        return Ok(command(apply, gate, run).await?);
    }
    let mut interval = FIRST_INTERVAL;
    let mut last_report = Instant::now();
    loop {
        let started = Instant::now();
        // A completion may take up to the budget: stop it at the deadline or on
        // interruption rather than after it.
        let attempt = tokio::select! {
            r = crate::probe::once(&client, &gate.probe, &resolve) => r.map_err(|m| m.to_string()),
            _ = apply.cancel.cancelled() => return Err("interrupted".into()),
            _ = tokio::time::sleep_until(deadline.into()) => Err("no answer before the deadline".into()),
        };
        let waiting = match attempt {
            Ok(detail) => return Ok(detail),
            Err(w) => w,
        };
        if let Some(dead) = dead_process(apply, rec).await {
            return Err(dead);
        }
        // The probe and the liveness check of every process, paced to at most half of
        // the time however large the deployment.
        let took = started.elapsed();
        if Instant::now() >= deadline {
            return Err(format!(
                "timed out after {}s waiting for {waiting}",
                apply.health.timeout_secs
            )
            .into());
        }
        if last_report.elapsed() >= Duration::from_secs(5) {
            (apply.events)(Event::Waiting {
                address: gate.address.clone(),
                detail: waiting,
            });
            last_report = Instant::now();
        }
        tokio::select! {
            _ = tokio::time::sleep(interval.max(took)) => {}
            _ = apply.cancel.cancelled() => return Err("interrupted".into()),
        }
        interval = (interval.mul_f32(1.5)).min(cap);
    }
}

/// The benchmark resource: a run of [`crate::bench`], results under the deployment's
/// state directory; stage lines as progress.
async fn benchmark(
    apply: &Apply<'_>,
    gate: &Gate,
    spec: &crate::bench::Spec,
) -> Result<String, String> {
    let deployment = apply.launch.deployment.clone();
    let place = crate::bench::Place {
        deployment_dir: apply.store.dir(),
        deployment: &deployment,
    };
    let progress = |detail: String| {
        (apply.events)(Event::Waiting {
            address: gate.address.clone(),
            detail,
        });
    };
    let report = crate::bench::run(spec, &place, &progress).await?;
    report.check().map_err(|e| e.to_string())?;
    Ok(report.summary())
}

/// What an interrupted benchmark leaves: a slow-down it set is turned off first, as
/// the run would have.
async fn interrupted(spec: &crate::bench::Spec) -> String {
    match spec.release().await {
        Ok(false) => "interrupted".into(),
        Ok(true) => "interrupted (the decode workers' slow-down turned off)".into(),
        Err(e) => format!("interrupted; {e}"),
    }
}

/// How often a running command is looked at (the SLURM executor asks the scheduler at
/// most once a second per job).
const COMMAND_POLL: Duration = Duration::from_millis(250);

/// A command run to completion (a `custom` benchmark): started through the executor as
/// a process of its own (its lease names it, so one an apply that died left running is
/// an orphan the next apply or destroy stops), watched until it is gone, then judged by
/// the status it wrote. Interrupted, it is stopped. It runs as long as it takes.
async fn command(
    apply: &Apply<'_>,
    gate: &Gate,
    run: &crate::launch::CommandRun,
) -> Result<String, String> {
    let address = format!("{}.command", gate.address);
    let process = run.process(&address);
    let status_path = apply.exec.bindings().resolve(&run.status);
    // A status an earlier run left must not stand for this one, which may never start.
    match std::fs::remove_file(&status_path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("cannot remove {status_path}: {e}"))
        }
        _ => {}
    }
    let started = apply.exec.start(&process).map_err(|e| e.to_string())?;
    let began = Instant::now();
    match apply.exec.confirm(&started).await {
        Ok(runtime) => watch(apply, gate, &runtime, &started.log_path).await?,
        // A short command can be over before its scheduler lists it: the status it
        // wrote (or did not) says how it went.
        Err(crate::exec::ExecError::StepEnded { .. }) => {}
        Err(e) => return Err(e.to_string()),
    }
    let status = written_status(&status_path).await;
    let tail = || {
        apply
            .exec
            .log_tail(&address, 20)
            .map(|t| format!("; its last lines:\n{}", this_run(&t)))
            .unwrap_or_default()
    };
    match status {
        Some(0) => Ok(format!(
            "the command exited 0 after {:.1}s (output in {})",
            began.elapsed().as_secs_f64(),
            started.log_path.display()
        )),
        Some(code) => Err(format!("the command exited {code}{}", tail())),
        None => Err(format!(
            "the command ended without writing its exit status to {status_path} (killed?){}",
            tail()
        )),
    }
}

/// How long a command's missing status is looked for again: a shared filesystem may
/// show a file written on another node a moment late.
const STATUS_GRACE: Duration = Duration::from_secs(3);

/// The exit status a command wrote to `path`, looked for until [`STATUS_GRACE`] has
/// passed when it is not there yet.
async fn written_status(path: &str) -> Option<i32> {
    let read = || {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
    };
    let until = Instant::now() + STATUS_GRACE;
    loop {
        if let Some(status) = read() {
            return Some(status);
        }
        if Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Wait until a started command is gone, saying every few seconds that it runs; stop
/// it when apply is interrupted.
async fn watch(
    apply: &Apply<'_>,
    gate: &Gate,
    runtime: &Runtime,
    log_path: &std::path::Path,
) -> Result<(), String> {
    let began = Instant::now();
    let mut last_report = Instant::now();
    while apply.exec.observe(runtime).await.is_alive() {
        if apply.cancel.is_cancelled() {
            let _ = apply.exec.stop(runtime).await;
            return Err("interrupted".into());
        }
        if last_report.elapsed() >= Duration::from_secs(5) {
            (apply.events)(Event::Waiting {
                address: gate.address.clone(),
                detail: format!(
                    "the command runs ({}s; output in {})",
                    began.elapsed().as_secs(),
                    log_path.display()
                ),
            });
            last_report = Instant::now();
        }
        tokio::select! {
            _ = tokio::time::sleep(COMMAND_POLL) => {}
            _ = apply.cancel.cancelled() => {}
        }
    }
    Ok(())
}

/// The lines of a command's log tail that this run wrote: those after the last line
/// it starts with (all of them when the run's output is longer than the tail).
fn this_run(tail: &str) -> &str {
    let marker = crate::launch::COMMAND_STARTS;
    match tail.rfind(marker) {
        Some(at) => tail[at + marker.len()..].trim_start_matches('\n'),
        None => tail,
    }
}

/// A recorded process of the deployment that died: mark it failed and describe it.
/// The executor is asked without holding the state mutex (it may ask a scheduler).
async fn dead_process(apply: &Apply<'_>, rec: &Recorder<'_>) -> Option<StepError> {
    let running: Vec<(String, Runtime)> = rec.read(|s| {
        s.resources
            .iter()
            .filter(|(_, r)| r.status == Status::Running)
            .filter_map(|(a, r)| Some((a.clone(), r.runtime.clone()?)))
            .collect()
    });
    let mut dead = None;
    for (addr, rt) in running {
        if let Observation::Gone(detail) = apply.exec.observe(&rt).await {
            dead = Some((addr, rt, detail));
            break;
        }
    }
    let (addr, rt, detail) = dead?;
    let message = format!("`{addr}` died while waiting: {detail}");
    let _ = rec.died(&addr, &rt, detail);
    Some(StepError::caused_by(message, addr))
}

#[cfg(test)]
mod tests {
    use super::this_run;

    #[test]
    fn a_command_failure_shows_the_lines_of_this_run_only() {
        let marker = crate::launch::COMMAND_STARTS;
        let tail = format!("{marker}\nfirst run\n--- srt: starting benchmark.command ---\n{marker}\nsecond run\nexit 7\n");
        assert_eq!(this_run(&tail), "second run\nexit 7\n");
        assert_eq!(
            this_run("only the end of a long run\n"),
            "only the end of a long run\n"
        );
    }
}
