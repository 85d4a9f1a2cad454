//! The on-disk format of a deployment's state (`state.json`).
//!
//! The state records what `srt apply` last made true in the world: one
//! [`ResourceState`] per resource address, with the content hash and the canonical
//! spec that were applied, and the late-bound facts (pid, job id, node, ports) that
//! only exist once something runs.
//!
//! Serialization is deterministic: maps are ordered (`BTreeMap`), object keys inside
//! [`ResourceState::spec`] are written sorted, and the state holds no timestamps, so
//! the same content always produces the same bytes. That is what lets the store skip
//! a write (and keep [`State::serial`]) when nothing changed.

use std::collections::BTreeMap;
use std::path::PathBuf;

pub(super) use crate::graph::Kind;

use serde::{Deserialize, Serialize};

use crate::graph::Spec;
use crate::launch::Probe;

/// The version of the state file format this build reads and writes.
///
/// Bumped on any change that an older `srt` could not read correctly; a file with a
/// higher version is refused rather than misread (see
/// [`StateError::NewerFormat`](super::StateError::NewerFormat)).
///
/// - 1: resource kinds from a closed list (`worker`, `router`, `nginx`, ...).
/// - 2: a process's kind is `worker` or the name of a frontend's component (`router`,
///   `nginx`, `etcd`, ...): a srt that reads version 1 only would misread the names it
///   does not know. Version 1 files read as they are (their names are version 2's).
pub const FORMAT_VERSION: u32 = 2;

/// The recorded state of one deployment.
///
/// Field order is the order in the file: the small header fields come first so that a
/// reader (human or tool) sees the version, lineage and serial at the top.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Version of this file format; see [`FORMAT_VERSION`].
    pub format_version: u32,
    /// Version of the `srt` that last wrote the file (`CARGO_PKG_VERSION`).
    pub srt_version: String,
    /// A UUID (v4) chosen when the state is created and never changed afterwards.
    ///
    /// Together with [`serial`](Self::serial) it answers "is this the same state, and
    /// is it newer?", which is how a saved plan detects that it went stale.
    pub lineage: String,
    /// Incremented by every save whose content differs from what is on disk.
    ///
    /// A save that changes nothing keeps the serial, so a no-op apply does not
    /// invalidate plans saved against this state.
    pub serial: u64,
    /// Name of the deployment this state belongs to.
    pub deployment: String,
    /// Hex blake3 of the canonical recipe last applied, if any apply happened.
    pub recipe_hash: Option<String>,
    /// What the last successful apply declared it runs (the launch plan's `identity`:
    /// the recipe's model repository and revision, image, framework versions), as it
    /// was written; in no resource's hash. Absent when the recipe declares none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<serde_json::Value>,
    /// Every resource known to the deployment, keyed by address
    /// (e.g. `worker.prefill[0].node[0]`).
    pub resources: BTreeMap<String, ResourceState>,
    /// A sweep's progress (`srt sweep`): the points that ran in this deployment. Absent
    /// when no sweep ran (an older srt ignores it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepProgress>,
}

/// What a sweep's points came to, by point name: a sweep run again skips the points
/// done with the same desired graph.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepProgress {
    /// Each point that ran, by its name.
    pub points: BTreeMap<String, SweepPoint>,
}

/// One point's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// The desired graph's hash when it ran (the recipe's hash a plan records): the
    /// same point, changed, is not done.
    pub hash: String,
    /// Whether its apply and benchmark passed.
    pub outcome: SweepOutcome,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A point's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SweepOutcome {
    /// Applied, and its benchmark passed.
    Done,
    /// Its apply or its benchmark failed.
    Failed,
}

impl SweepProgress {
    /// Whether point `name` is done with desired graph `hash`.
    pub fn done(&self, name: &str, hash: &str) -> bool {
        self.points
            .get(name)
            .is_some_and(|p| p.hash == hash && p.outcome == SweepOutcome::Done)
    }
}

impl State {
    /// A fresh, empty state for `deployment`: a new lineage, serial 0, the current
    /// format and `srt` version, no recipe applied yet.
    pub fn new(deployment: impl Into<String>) -> Self {
        State {
            format_version: FORMAT_VERSION,
            srt_version: env!("CARGO_PKG_VERSION").to_string(),
            lineage: uuid::Uuid::new_v4().to_string(),
            serial: 0,
            deployment: deployment.into(),
            recipe_hash: None,
            identity: None,
            resources: BTreeMap::new(),
            sweep: None,
        }
    }
}

/// What the state knows about one resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceState {
    /// Resource kind (`worker`, `router`, `nginx`, `gate`, `ports`, `smoke`,
    /// `allocation`, ... in the file).
    pub kind: Kind,
    /// Hex content hash (Merkle: the resource's spec plus its dependencies' hashes)
    /// of what was last applied.
    pub hash: String,
    /// Addresses of the resources this one depends on directly, sorted.
    ///
    /// Only direct dependencies are stored (transitive ones are derived when needed),
    /// so that a resource removed from the recipe can still be destroyed in order
    /// without the state growing with the square of the graph.
    pub dependencies: Vec<String>,
    /// The canonical spec last applied, with secrets already masked by the caller: the
    /// text its hash covered, written on one line (one compact JSON object, keys
    /// sorted) and read back without building a value (see [`Spec`]).
    pub spec: Spec,
    /// Where the resource stands; see [`Status`].
    pub status: Status,
    /// How to find the running thing again (process or SLURM step), once launched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
    /// Node the resource runs on (a host name), once placed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Ports bound by the resource, by port kind (e.g. `http`, `kv`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ports: BTreeMap<String, u16>,
    /// File the resource's output is written to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_path: Option<PathBuf>,
    /// The last failure message, when [`status`](Self::status) is [`Status::Failed`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How a process shows it serves: the probe it was applied with
    /// ([`LaunchProcess::health_probe`](crate::launch::LaunchProcess::health_probe),
    /// placeholders kept), which `srt status` and refresh run again. Not part of the
    /// spec nor of the hash: how a process is checked is not what runs. Absent for what
    /// serves nothing itself and in records written before probes were recorded (read
    /// as `GET /health` on the process's HTTP port, as srt probed them then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<Probe>,
    /// What a replacement created first has yet to release: an allocation's earlier
    /// runtimes (SLURM jobs), which processes not moved yet may still run in
    /// (Terraform's deposed objects). Each is released once no recorded process runs in
    /// it. Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deposed: Vec<Runtime>,
}

impl ResourceState {
    /// The record of the desired resource `r` with `status`: its kind, hash, direct
    /// dependencies and spec, and nothing learned from running it yet (no runtime,
    /// node, ports, log or error).
    pub fn of(r: &crate::graph::Resource, status: Status) -> ResourceState {
        ResourceState {
            kind: r.kind,
            hash: r.hash.clone(),
            dependencies: r.deps.clone(),
            spec: r.spec.clone(),
            status,
            runtime: None,
            node: None,
            ports: BTreeMap::new(),
            log_path: None,
            error: None,
            health: None,
            deposed: Vec::new(),
        }
    }
}

/// Where a resource stands, as far as the last apply knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Intent record: written before an executor launches the resource. If an apply is
    /// interrupted, the record is left behind and the next plan re-probes the resource
    /// instead of trusting it.
    Pending,
    /// Launched and passed its checks with the recorded hash.
    Running,
    /// The last attempt failed; [`ResourceState::error`] says why.
    Failed,
    /// Marked for replacement on the next apply, whatever its hash.
    Tainted,
}

/// How to find a launched resource again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Runtime {
    /// A local process.
    Local {
        /// Process id.
        pid: u32,
        /// Process start time (clock ticks since boot, from `/proc/<pid>/stat`), which
        /// tells a recycled pid apart from the process that was launched.
        start_time: u64,
        /// Process group id, used to signal the whole group.
        pgid: u32,
        /// Host the process runs on.
        host: String,
        /// The lease file the process signed before it exec'd (`leases/<address>.lease`
        /// in the deployment directory): the mark checked before any signal, and how
        /// its descendants are found. Absent in states written before leases existed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lease: Option<PathBuf>,
    },
    /// A SLURM job, or one step of it.
    Slurm {
        /// SLURM job id.
        job_id: u64,
        /// Step id within the job, when the resource is a step.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step_id: Option<u64>,
        /// Step name within the job, when the resource is a named step.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step_name: Option<String>,
        /// Host names of the nodes: every node of the allocation, or the step's node.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        nodes: Vec<String>,
        /// IPv4 address of each node in `nodes` (the allocation only).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        node_ips: Vec<String>,
        /// The allocation was adopted from `SLURM_JOB_ID`, not submitted by srt: it is
        /// never cancelled by srt.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        adopted: bool,
        /// The detached `srun` client that owns the step (a step ends with its client),
        /// when srt started it where it runs; for an adopted allocation, the client of
        /// the node agents' step srt started in it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client: Option<Client>,
        /// The id of the launch srt handed to the agent of the step's first node, which
        /// started its client there (`exec::agent`): how a step not listed yet is told
        /// on its way, and stopped once it is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        launch: Option<String>,
        /// The plan nodes an allocation holds, in the order of `nodes` (absent in
        /// records written when one allocation held every node).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        slots: Vec<usize>,
    },
}

impl Runtime {
    /// A short description for apply's progress lines: `pid 1234`, `step 12.3 on n2`,
    /// `job 12 on n1,n2`.
    pub fn describe(&self) -> String {
        match self {
            Runtime::Local { pid, .. } => format!("pid {pid}"),
            Runtime::Slurm {
                job_id,
                step_id: Some(step),
                nodes,
                ..
            } => format!("step {job_id}.{step} on {}", nodes.join(",")),
            Runtime::Slurm { job_id, nodes, .. } => {
                format!("job {job_id} on {}", nodes.join(","))
            }
        }
    }

    /// The identity `srt status` shows: `pid 1234`, `job 12 step 3`, `job 12`.
    pub fn status_label(&self) -> String {
        match self {
            Runtime::Local { pid, .. } => format!("pid {pid}"),
            Runtime::Slurm {
                job_id,
                step_id: Some(s),
                ..
            } => format!("job {job_id} step {s}"),
            Runtime::Slurm { job_id, .. } => format!("job {job_id}"),
        }
    }

    /// How long the process has run, from its recorded start time (local processes on
    /// this machine; `None` for SLURM jobs and steps, whose start srt does not record).
    pub fn age(&self) -> Option<std::time::Duration> {
        let Runtime::Local { start_time, .. } = self else {
            return None;
        };
        let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()? as u64;
        let boot: u64 = std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse().ok())?;
        let started = boot + start_time / ticks.max(1);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_secs();
        Some(std::time::Duration::from_secs(now.saturating_sub(started)))
    }

    /// The allocation a process runs in, when the state records it as an allocation's
    /// runtime (a SLURM step's job, as [`Runtime::allocation_id`] names it).
    pub fn inside(&self) -> Option<String> {
        match self {
            Runtime::Slurm {
                job_id,
                step_name: Some(_),
                ..
            } => Some(format!("job {job_id}")),
            _ => None,
        }
    }

    /// The identity of the allocation this runtime is (a SLURM job, not one of its
    /// steps): what [`Runtime::inside`] of the processes in it names.
    pub fn allocation_id(&self) -> Option<String> {
        match self {
            Runtime::Slurm {
                job_id,
                step_name: None,
                ..
            } => Some(format!("job {job_id}")),
            _ => None,
        }
    }

    /// Whether a replacement of this allocation may be created beside it, before it is
    /// released: not for a job srt adopted (it has no other).
    pub fn doubles(&self) -> bool {
        matches!(self, Runtime::Slurm { adopted: false, .. })
    }

    /// The local process behind this runtime, as (pid, start time): the process itself,
    /// or a SLURM step's `srun` client. `None` for an allocation.
    pub fn process_key(&self) -> Option<(u32, u64)> {
        match self {
            Runtime::Local {
                pid, start_time, ..
            } => Some((*pid, *start_time)),
            Runtime::Slurm {
                client: Some(c), ..
            } => Some((c.pid, c.start_time)),
            Runtime::Slurm { .. } => None,
        }
    }
}

/// The local process of a SLURM step's `srun` client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Client {
    /// Process id.
    pub pid: u32,
    /// Start time (clock ticks since boot), to tell a recycled pid apart.
    pub start_time: u64,
    /// Process group id.
    pub pgid: u32,
    /// Host the client runs on.
    pub host: String,
    /// The client's lease file (see [`Runtime::Local`]'s `lease`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample_resource() -> ResourceState {
        ResourceState {
            kind: Kind::Worker,
            hash: "ab".repeat(32),
            dependencies: vec!["allocation".into(), "ports.node[0]".into()],
            spec: Spec::of(&json!({"argv": ["vllm", "serve"], "env": {"B": "2", "A": "1"}})),
            status: Status::Running,
            runtime: Some(Runtime::Local {
                pid: 4242,
                start_time: 123_456,
                pgid: 4242,
                host: "node1".into(),
                lease: None,
            }),
            node: Some("node1".into()),
            ports: BTreeMap::from([("http".into(), 8000)]),
            log_path: Some(PathBuf::from("/tmp/logs/worker.log")),
            error: None,
            health: Some(Probe::Http {
                urls: vec!["http://<node1-ip>:8000".into()],
                path: "/health".into(),
            }),
            deposed: Vec::new(),
        }
    }

    /// The probe of a worker its frontend lists, as a runtime builds it.
    fn listed_probe() -> Probe {
        Probe::JsonItems {
            urls: vec!["http://<node0-ip>:8000".into()],
            path: "/health".into(),
            lists: vec![crate::launch::Listed {
                name: "`worker.agg[0].node[0]` registered".into(),
                array: "/instances".into(),
                fields: vec![crate::launch::Field {
                    pointer: "/transport/tcp".into(),
                    value: "<node0-ip>:28100/".into(),
                    prefix: true,
                }],
                at_least: 1,
            }],
        }
    }

    #[test]
    fn new_state_has_fresh_lineage_and_serial_zero() {
        let a = State::new("demo");
        let b = State::new("demo");
        assert_eq!(a.serial, 0);
        assert_eq!(a.format_version, FORMAT_VERSION);
        assert_eq!(a.deployment, "demo");
        assert_eq!(a.srt_version, env!("CARGO_PKG_VERSION"));
        assert!(uuid::Uuid::parse_str(&a.lineage).is_ok());
        assert_ne!(a.lineage, b.lineage, "each state gets its own lineage");
    }

    #[test]
    fn status_and_runtime_use_lowercase_tags() {
        let r = sample_resource();
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["status"], "running");
        assert_eq!(v["runtime"]["type"], "local");
        assert_eq!(v["runtime"]["pid"], 4242);
        let slurm = Runtime::Slurm {
            job_id: 77,
            step_id: Some(1),
            step_name: None,
            nodes: Vec::new(),
            node_ips: Vec::new(),
            adopted: false,
            client: None,
            launch: None,
            slots: Vec::new(),
        };
        let v = serde_json::to_value(&slurm).unwrap();
        assert_eq!(v, json!({"type": "slurm", "job_id": 77, "step_id": 1}));
        for (status, text) in [
            (Status::Pending, "\"pending\""),
            (Status::Failed, "\"failed\""),
            (Status::Tainted, "\"tainted\""),
        ] {
            assert_eq!(serde_json::to_string(&status).unwrap(), text);
        }
    }

    #[test]
    fn runtimes_describe_themselves() {
        let local = sample_resource().runtime.unwrap();
        assert_eq!(local.describe(), "pid 4242");
        assert_eq!(local.status_label(), "pid 4242");
        assert_eq!(local.process_key(), Some((4242, 123_456)));
        let step = Runtime::Slurm {
            job_id: 12,
            step_id: Some(3),
            step_name: Some("d.router[0]".into()),
            nodes: vec!["n2".into()],
            node_ips: Vec::new(),
            adopted: false,
            client: Some(Client {
                pid: 77,
                start_time: 5,
                pgid: 77,
                host: "h".into(),
                lease: None,
            }),
            launch: None,
            slots: Vec::new(),
        };
        assert_eq!(step.describe(), "step 12.3 on n2");
        assert_eq!(step.status_label(), "job 12 step 3");
        assert_eq!(step.process_key(), Some((77, 5)));
        assert_eq!(step.age(), None);
        let job = Runtime::Slurm {
            job_id: 12,
            step_id: None,
            step_name: None,
            nodes: vec!["n1".into(), "n2".into()],
            node_ips: Vec::new(),
            adopted: false,
            client: None,
            launch: None,
            slots: Vec::new(),
        };
        assert_eq!(job.describe(), "job 12 on n1,n2");
        assert_eq!(job.status_label(), "job 12");
        assert_eq!(job.process_key(), None);
    }

    #[test]
    fn absent_optional_fields_are_omitted_and_read_back_as_none() {
        let r = ResourceState {
            runtime: None,
            node: None,
            ports: BTreeMap::new(),
            log_path: None,
            error: None,
            health: None,
            ..sample_resource()
        };
        let text = serde_json::to_string(&r).unwrap();
        for key in ["runtime", "node", "ports", "log_path", "error", "health"] {
            assert!(!text.contains(&format!("\"{key}\"")), "{key} in {text}");
        }
        let back: ResourceState = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
    }

    /// A record keeps the probe it was applied with, placeholders and all, beside the
    /// spec: the spec's text (what the hash covers) is the same with or without it.
    #[test]
    fn a_recorded_probe_round_trips_outside_the_spec() {
        for probe in [sample_resource().health.unwrap(), listed_probe()] {
            let r = ResourceState {
                health: Some(probe.clone()),
                ..sample_resource()
            };
            let text = serde_json::to_string_pretty(&r).unwrap();
            let back: ResourceState = serde_json::from_str(&text).unwrap();
            assert_eq!(back.health, Some(probe));
            assert_eq!(back.spec.as_str(), sample_resource().spec.as_str());
            assert!(
                !back.spec.as_str().contains("health"),
                "{}",
                back.spec.as_str()
            );
        }
        let v = serde_json::to_value(listed_probe()).unwrap();
        assert_eq!(v["type"], "json_items");
        assert_eq!(v["lists"][0]["fields"][0]["value"], "<node0-ip>:28100/");
    }

    /// A record written before probes were recorded reads without one.
    #[test]
    fn a_record_without_a_probe_reads_as_none() {
        let mut v = serde_json::to_value(sample_resource()).unwrap();
        v.as_object_mut().unwrap().remove("health");
        let back: ResourceState = serde_json::from_value(v).unwrap();
        assert_eq!(back.health, None);
        assert_eq!(
            back,
            ResourceState {
                health: None,
                ..sample_resource()
            }
        );
    }

    #[test]
    fn spec_keys_are_written_sorted_whatever_the_insertion_order() {
        let mut r1 = sample_resource();
        let mut r2 = sample_resource();
        r1.spec = Spec::of(&json!({"z": 1, "a": {"y": 2, "b": [{"d": 1, "c": 2}]}}));
        // serde_json keeps insertion order (preserve_order), so build the reverse.
        let mut inner = serde_json::Map::new();
        inner.insert("b".into(), json!([{"c": 2, "d": 1}]));
        inner.insert("y".into(), json!(2));
        let mut outer = serde_json::Map::new();
        outer.insert("a".into(), serde_json::Value::Object(inner));
        outer.insert("z".into(), json!(1));
        r2.spec = Spec::of(&serde_json::Value::Object(outer));
        let t1 = serde_json::to_string(&r1).unwrap();
        let t2 = serde_json::to_string(&r2).unwrap();
        assert_eq!(t1, t2);
        assert!(t1.contains(r#""spec":{"a":{"b":[{"c":2,"d":1}],"y":2},"z":1}"#));
    }

    /// A spec is one line in a pretty state file, and a pretty one (as an older srt
    /// wrote it, here also with its keys out of order) reads back in canonical form.
    #[test]
    fn specs_are_written_compact_and_read_back_canonical() {
        let r = sample_resource();
        let pretty = serde_json::to_string_pretty(&r).unwrap();
        assert!(pretty.contains(r#""spec": {"argv":["vllm","serve"],"env":{"A":"1","B":"2"}},"#));
        let back: ResourceState = serde_json::from_str(&pretty).unwrap();
        assert_eq!(back.spec.as_str(), r.spec.as_str());
        let older = pretty.replace(
            r#"{"argv":["vllm","serve"],"env":{"A":"1","B":"2"}}"#,
            "{\n      \"env\": {\"B\": \"2\",\n \"A\": \"1\"},\n      \"argv\": [\n \"vllm\", \"serve\"]\n    }",
        );
        assert_ne!(older, pretty);
        let back: ResourceState = serde_json::from_str(&older).unwrap();
        assert_eq!(back.spec.as_str(), r.spec.as_str());
        // Whitespace inside strings is content, not layout.
        let spaced = Spec::of(&json!({"argv": ["a b", "c\nd\t"]}));
        let text = serde_json::to_string(&spaced).unwrap();
        let back: Spec = serde_json::from_str(&text).unwrap();
        assert_eq!(back.as_str(), spaced.as_str());
    }

    #[test]
    fn state_round_trips_through_json() {
        let mut s = State::new("demo");
        s.serial = 7;
        s.recipe_hash = Some("cd".repeat(32));
        s.resources
            .insert("worker.prefill[0].node[0]".into(), sample_resource());
        let text = serde_json::to_string_pretty(&s).unwrap();
        let back: State = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
        // The header comes first, in declaration order.
        let fv = text.find("\"format_version\"").unwrap();
        let serial = text.find("\"serial\"").unwrap();
        let resources = text.find("\"resources\"").unwrap();
        assert!(fv < serial && serial < resources);
    }
}
