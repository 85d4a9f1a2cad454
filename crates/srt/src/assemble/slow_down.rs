//! srtctl's sa-bench slow-down, placed: the servers it slows are the decode workers'
//! leaders, through their engine's own route ([`Engine::slow_down_route`]). A deployment
//! with none to slow runs the benchmark without it, with a warning, as srtctl does
//! (`benchmark_stage`: SGLang's frontend and decode leaders only).

use crate::engine::Engine;
use crate::launch::LaunchProcess;
use crate::recipe::{Problem, RoleKind, SlowDown};

/// The slow-down of `slow` on this deployment, or the warning saying why it is not read.
pub(super) fn place(
    slow: &SlowDown,
    engine: &dyn Engine,
    frontend: &str,
    processes: &[LaunchProcess],
) -> Result<crate::bench::SlowDown, Problem> {
    let unread = |why: String, help: &str| {
        Problem::warning(
            "srt::recipe::slow_down_unread",
            slow.span,
            format!("`benchmark.slow_down_*` is not read: {why}"),
        )
        .label("not read")
        .help(format!(
            "{help}, and runs the benchmark without it here too; remove `slow_down_sleep_time` and `slow_down_wait_time`"
        ))
    };
    let Some(path) = engine.slow_down_route() else {
        return Err(unread(
            format!(
                "engine `{}` has no route that slows its workers down",
                engine.name()
            ),
            "srtctl slows SGLang's decode workers only (`/slow_down`)",
        ));
    };
    let decode: Vec<&LaunchProcess> = processes
        .iter()
        .filter(|p| {
            p.worker
                .as_ref()
                .is_some_and(|w| w.role == RoleKind::Decode && !w.headless)
        })
        .collect();
    if decode.is_empty() {
        return Err(unread(
            "the deployment has no decode workers".into(),
            "srtctl slows the decode workers of a disaggregated deployment only",
        ));
    }
    let servers: Option<Vec<String>> = decode
        .iter()
        .map(|p| p.worker.as_ref()?.advertised_url.clone())
        .collect();
    let Some(servers) = servers else {
        return Err(unread(
            format!("frontend `{frontend}` does not reach the decode workers' own HTTP servers"),
            "srtctl slows them only behind SGLang's frontend (`frontend.type: sglang`)",
        ));
    };
    Ok(crate::bench::SlowDown {
        servers,
        path: path.to_string(),
        sleep_seconds: slow.sleep_seconds,
        wait_seconds: slow.wait_seconds,
    })
}
