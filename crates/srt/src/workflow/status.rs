//! Live status of a deployment: every recorded resource, probed now.

use super::health::Health;
use crate::exec::Executor;
use crate::launch::{Bindings, Probe};
use crate::plan::Observation;
use crate::state::{ResourceState, Runtime, State, StateStore, Status};
use futures::StreamExt;
use serde::Serialize;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `srt status` shows for one resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ResourceStatus {
    /// Address.
    pub address: String,
    /// Kind.
    pub kind: crate::graph::Kind,
    /// Node, when placed.
    pub node: Option<String>,
    /// Ports by kind.
    pub ports: Vec<(String, u16)>,
    /// `pid 123` or `job 7 step 2`.
    pub runtime: Option<String>,
    /// `running`, `healthy`, `unhealthy`, `failed`, `drifted`, `pending`, `tainted`,
    /// `passed` (gates).
    pub state: String,
    /// Seconds since the process started (local processes).
    pub age_secs: Option<u64>,
    /// The recorded error, if any.
    pub error: Option<String>,
}

/// Deployments that have state under `state_dir`, sorted.
pub fn deployments(state_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(state_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join(crate::state::STATE_FILE).is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The probe that shows a recorded process serves: the one it was applied with, or, in
/// a record written before records held one, `GET /health` on its HTTP port (the first
/// of [`crate::launch::HEALTH_PORTS`]) at the address the executor gives its node.
pub(crate) fn health_probe<'r>(
    r: &'r ResourceState,
    bindings: &Bindings,
) -> Option<Cow<'r, Probe>> {
    if let Some(probe) = &r.health {
        return Some(Cow::Borrowed(probe));
    }
    let port = crate::launch::HEALTH_PORTS
        .iter()
        .find_map(|k| r.ports.get(*k).copied())?;
    let node_index = r
        .node
        .as_deref()
        .and_then(|n| n.strip_prefix("node"))
        .and_then(|i| i.parse::<usize>().ok())
        .unwrap_or(0);
    let ip = bindings
        .node_ips
        .get(node_index)
        .cloned()
        .unwrap_or_else(|| "127.0.0.1".into());
    Some(Cow::Owned(Probe::Http {
        urls: vec![format!("http://{ip}:{port}")],
        path: "/health".into(),
    }))
}

/// Probe every recorded resource: liveness through the executor (every process at
/// once), then each live process's health probe ([`health_probe`]; a `GET` answering
/// 2xx within 2 s is healthy; a worker its frontend lists is healthy when the frontend
/// lists it, and stays `running` when the frontend does not answer), as many at once
/// as refresh probes.
pub async fn status(state: &State, exec: &dyn Executor) -> Vec<ResourceStatus> {
    let bindings = exec.bindings();
    let running: Vec<(&String, &Runtime)> = state
        .resources
        .iter()
        .filter(|(_, r)| r.status == Status::Running)
        .filter_map(|(a, r)| Some((a, r.runtime.as_ref()?)))
        .collect();
    let runtimes: Vec<&Runtime> = running.iter().map(|(_, rt)| *rt).collect();
    let seen: BTreeMap<&String, Observation> = running
        .iter()
        .map(|(a, _)| *a)
        .zip(exec.observe_all(&runtimes).await)
        .collect();
    let mut lives: Vec<String> = state
        .resources
        .iter()
        .map(|(address, r)| match (&r.runtime, r.status) {
            (_, Status::Failed) => "failed".to_string(),
            (_, Status::Pending) => "pending".to_string(),
            (_, Status::Tainted) => "tainted".to_string(),
            (Some(_), Status::Running) => match seen.get(address) {
                Some(Observation::Alive) => "running".to_string(),
                Some(Observation::Renew(_)) => "renew due".to_string(),
                _ => "drifted".to_string(),
            },
            (None, Status::Running) if r.kind.is_check() => "passed".to_string(),
            (None, Status::Running) => "ok".to_string(),
        })
        .collect();
    let probes: Vec<(usize, Cow<'_, Probe>)> = state
        .resources
        .values()
        .enumerate()
        .filter(|(i, _)| lives[*i] == "running")
        .filter_map(|(i, r)| Some((i, health_probe(r, &bindings)?)))
        .collect();
    let looked = look_all(&probes, &bindings).await;
    for (i, health) in looked {
        match health {
            Health::Healthy => lives[i] = "healthy".to_string(),
            Health::Unhealthy => lives[i] = "unhealthy".to_string(),
            Health::Unknown => {}
        }
    }
    let mut out = Vec::with_capacity(state.resources.len());
    for ((address, r), live) in state.resources.iter().zip(lives) {
        out.push(ResourceStatus {
            address: address.clone(),
            kind: r.kind,
            node: r.node.clone(),
            ports: r.ports.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            runtime: r.runtime.as_ref().map(Runtime::status_label),
            state: live,
            age_secs: r
                .runtime
                .as_ref()
                .and_then(Runtime::age)
                .map(|d| d.as_secs()),
            error: r.error.clone(),
        });
    }
    out
}

/// How long `srt status` waits for one health request.
const LOOK_TIMEOUT: Duration = Duration::from_secs(2);

/// One look at each `(position, probe)`, as many at once as refresh probes: what each
/// showed, in the order they finish.
async fn look_all(probes: &[(usize, Cow<'_, Probe>)], bindings: &Bindings) -> Vec<(usize, Health)> {
    let client = reqwest::Client::builder()
        .timeout(LOOK_TIMEOUT)
        .no_proxy()
        .build()
        .expect("http client");
    let resolve = |s: &str| bindings.resolve(s);
    let answers = crate::probe::Answers::default();
    let (client, resolve, answers) = (&client, &resolve, &answers);
    let checks = probes.iter().map(|(i, probe)| async move {
        let health = super::health::look(probe, resolve, (client, answers), LOOK_TIMEOUT);
        (*i, health.await)
    });
    futures::stream::iter(checks)
        .buffer_unordered(super::PROBES_IN_FLIGHT)
        .collect()
        .await
}

/// Human duration: `45s`, `12m`, `3h`, `2d`.
pub fn human_age(secs: u64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// Where a resource's log is: derived from the deployment directory and the address
/// (never a path read from state), when the resource has one.
pub fn log_path(store: &StateStore, state: &State, address: &str) -> Option<PathBuf> {
    let r = state.resources.get(address)?;
    let p = crate::state::log_file(store.dir(), address);
    (r.log_path.is_some() || p.is_file()).then_some(p)
}
