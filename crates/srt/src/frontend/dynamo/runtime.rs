//! The Dynamo runtime the workers run under: what makes an engine's Dynamo wrapper
//! (`python3 -m dynamo.vllm`) register in the deployment's namespace, how srt sees that
//! it did, and the Dynamo mocker that stands in for it under `--simulate`.

use super::section::{Planes, Transport};
use crate::launch::{
    Argv, BuildContext, Field, LaunchProcess, Listed, Probe, Serving, WorkerRuntime, LEARNED,
};
use crate::ports::{RUNTIME_RPC, RUNTIME_SYSTEM};
use crate::recipe::RoleKind;

/// The runtime's name, which engines key their wrappers by.
pub(super) const NAME: &str = "dynamo";

/// Flags of an engine's Dynamo wrapper (`dynamo.vllm`) srt sets, and why.
pub(super) const MANAGED: &[(&str, &str)] = &[
    (
        "endpoint",
        "each role registers at `dyn://<deployment>.<backend|prefill>.generate`",
    ),
    (
        "namespace",
        "every deployment has its own Dynamo namespace, named after it",
    ),
    (
        "discovery-backend",
        "the workers register in the deployment's own etcd",
    ),
    ("disaggregation-mode", "it follows the role"),
    ("request-plane", "it is `dynamo.request_plane`"),
    ("event-plane", "it is `dynamo.event_plane`"),
    (
        "connector",
        "the KV connector is `engine.connector` (srt renders `--kv-transfer-config`)",
    ),
    (
        "headless",
        "srt runs every worker of a role with its own registration",
    ),
];

/// The runtime of one deployment.
#[derive(Debug)]
pub(super) struct DynamoRuntime {
    /// The deployment's namespace.
    pub namespace: String,
    /// etcd's client URL.
    pub etcd: String,
    /// nats-server's URL, when a plane is on NATS.
    pub nats: Option<String>,
    /// The request and event planes.
    pub planes: Planes,
    /// Every frontend's base URL: a worker serves once each one's `/health` lists it
    /// (behind nginx, a rolled worker must be routable by every frontend before the
    /// next one stops).
    pub frontends: Vec<String>,
}

/// The component a role's workers register as: Dynamo's frontend sends prefill work to
/// `prefill` and everything else to `backend`.
fn component(role: RoleKind) -> &'static str {
    match role {
        RoleKind::Prefill => "prefill",
        RoleKind::Decode | RoleKind::Agg => "backend",
    }
}

/// `--disaggregation-mode` of a role (the wrappers' and the mocker's).
fn mode(role: RoleKind) -> &'static str {
    match role {
        RoleKind::Prefill => "prefill",
        RoleKind::Decode => "decode",
        RoleKind::Agg => "agg",
    }
}

/// What identifies a `generate` instance of `role`'s workers in the frontend's
/// `/health` list.
pub(super) fn instance_fields(namespace: &str, role: RoleKind) -> Vec<Field> {
    let exact = |pointer: &str, value: &str| Field {
        pointer: pointer.into(),
        value: value.into(),
        prefix: false,
    };
    vec![
        exact("/namespace", namespace),
        exact("/component", component(role)),
        exact("/endpoint", "generate"),
    ]
}

impl WorkerRuntime for DynamoRuntime {
    fn name(&self) -> &'static str {
        NAME
    }

    fn adopt(
        &self,
        ctx: &mut BuildContext<'_>,
        process: &mut LaunchProcess,
        serving: &Serving,
        own: &[String],
    ) -> Result<(), String> {
        let Some(info) = process.worker.as_mut() else {
            return Ok(());
        };
        if info.headless {
            // A follower node runs vLLM ranks for its endpoint's leader, which registers
            // for the whole endpoint.
            return Ok(());
        }
        let role = info.role;
        let ip = ctx.node_ip(process.node);
        process
            .env
            .insert("ETCD_ENDPOINTS".into(), self.etcd.clone());
        process
            .env
            .insert("DYN_EVENT_PLANE_HOST".into(), ip.clone());
        if let Some(nats) = &self.nats {
            process.env.insert("NATS_SERVER".into(), nats.clone());
        }
        let endpoint = format!("dyn://{}.{}.generate", self.namespace, component(role));
        let mut registration = vec![
            "--endpoint",
            &endpoint,
            "--discovery-backend",
            "etcd",
            "--disaggregation-mode",
            mode(role),
        ];
        registration.extend(self.planes.flags());
        process.argv.extend(own.iter().map(String::as_str));
        process.argv.extend(registration.iter().copied());
        let listed = match self.planes.request {
            Transport::Nats => self.learned_instance(ctx, process, role)?,
            _ => self.tcp_instance(ctx, process, role)?,
        };
        let info = process.worker.as_mut().expect("a worker");
        info.health = Some(listed);
        let python = process.argv.program().unwrap_or("python3").to_string();
        info.simulated = Some(mocker(&python, serving, &registration));
        Ok(())
    }
}

impl DynamoRuntime {
    /// Every frontend's `/health` lists an instance of `role` whose fields also match
    /// `own`.
    fn listed(&self, address: &str, role: RoleKind, own: Field) -> Probe {
        let mut fields = instance_fields(&self.namespace, role);
        fields.push(own);
        Probe::JsonItems {
            urls: self.frontends.clone(),
            path: "/health".into(),
            lists: vec![Listed {
                name: format!("`{address}` registered"),
                array: "/instances".into(),
                fields,
                at_least: 1,
            }],
        }
    }

    /// On the TCP request plane a worker listens on a port srt allocates, which names
    /// its instance in the frontend's list (`transport.tcp` is `IP:PORT/...`).
    fn tcp_instance(
        &self,
        ctx: &mut BuildContext<'_>,
        process: &mut LaunchProcess,
        role: RoleKind,
    ) -> Result<Probe, String> {
        let ip = ctx.node_ip(process.node);
        let rpc = ctx
            .allocate(&RUNTIME_RPC, process.node, 1, &process.address)
            .map_err(|e| e.to_string())?;
        process.ports.insert(RUNTIME_RPC.name.to_string(), rpc);
        process.env.insert("DYN_TCP_RPC_HOST".into(), ip.clone());
        process
            .env
            .insert("DYN_TCP_RPC_PORT".into(), rpc.base.to_string());
        let own = Field {
            pointer: "/transport/tcp".into(),
            value: format!("{ip}:{}/", rpc.base),
            prefix: true,
        };
        Ok(self.listed(&process.address, role, own))
    }

    /// On the NATS request plane a worker listens on no port of its own: its instance
    /// is the id it registered with, which its system server's metrics name
    /// (`worker_id="<hex>"`) and the frontend lists as the NATS subject
    /// `<namespace>_<component>.generate-<hex>`.
    fn learned_instance(
        &self,
        ctx: &mut BuildContext<'_>,
        process: &mut LaunchProcess,
        role: RoleKind,
    ) -> Result<Probe, String> {
        let ip = ctx.node_ip(process.node);
        let system = ctx
            .allocate(&RUNTIME_SYSTEM, process.node, 1, &process.address)
            .map_err(|e| e.to_string())?;
        process
            .ports
            .insert(RUNTIME_SYSTEM.name.to_string(), system);
        process.env.insert("DYN_SYSTEM_HOST".into(), ip.clone());
        process
            .env
            .insert("DYN_SYSTEM_PORT".into(), system.base.to_string());
        let own = Field {
            pointer: "/transport/nats_tcp".into(),
            value: format!("{}_{}.generate-{LEARNED}", self.namespace, component(role)),
            prefix: false,
        };
        Ok(Probe::Learned {
            url: format!("http://{ip}:{}", system.base),
            path: "/metrics".into(),
            after: "worker_id=\"".into(),
            then: Box::new(self.listed(&process.address, role, own)),
        })
    }
}

/// The Dynamo mocker serving `serving`, registered as the worker would be.
fn mocker(python: &str, serving: &Serving, registration: &[&str]) -> Argv {
    let mut argv = Argv::from([python, "-m", "dynamo.mocker"]);
    argv.extend(["--model-path", &serving.model_path]);
    argv.extend(["--model-name", &serving.served_name]);
    argv.extend(registration.iter().copied());
    for (flag, value) in [
        ("--block-size", &serving.block_size),
        ("--max-num-seqs", &serving.max_num_seqs),
    ] {
        if let Some(v) = value {
            argv.extend([flag, v.as_str()]);
        }
    }
    if serving.data_parallel > 1 {
        argv.extend(["--data-parallel-size", &serving.data_parallel.to_string()]);
    }
    let prefill = registration.last() == Some(&mode(RoleKind::Prefill));
    if let (true, Some(ports)) = (prefill, serving.kv_ports) {
        let list: Vec<String> = (0..ports.count)
            .map(|i| (ports.base + i).to_string())
            .collect();
        argv.extend(["--bootstrap-ports", &list.join(",")]);
    }
    argv
}
