//! The Dynamo runtime the workers run under: what makes an engine's Dynamo wrapper
//! (`python3 -m dynamo.vllm`, `python3 -m dynamo.sglang`) register in the deployment's
//! namespace, how srt sees that it did, and the Dynamo mocker that stands in for it
//! under `--simulate`, scheduling as the engine does.

use super::registration;
use super::section::{Planes, Transport};
use crate::catalog::{Catalog, Resolution};
use crate::launch::{
    Argv, BuildContext, Field, LaunchProcess, Listed, Probe, Serving, WorkerRuntime, LEARNED,
};
use crate::ports::{RUNTIME_RPC, RUNTIME_SYSTEM};
use crate::recipe::RoleKind;

/// The runtime's name, which engines key their wrappers by.
pub(super) const NAME: &str = "dynamo";

/// Flags of an engine's Dynamo wrapper (`dynamo.vllm`, `dynamo.sglang`) srt sets, and
/// why.
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
        "the KV connector is `engine.connector`, which srt renders as the engine's flag",
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
    /// The ai-dynamo each worker installs before its program (`dynamo.install`),
    /// if any.
    pub install: Option<super::install::Install>,
    /// The ai-dynamo release the recipe names, whose wrappers' registration the
    /// workers are given ([`super::registration`]).
    pub release: Option<String>,
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
        let Some(info) = process.worker.as_ref() else {
            return Ok(());
        };
        let (role, headless) = (info.role, info.headless);
        if let Some(what) = &self.install {
            // srtctl installs it before every worker's program, a follower's too.
            let python = super::install::interpreter(&process.argv).unwrap_or("python3");
            let setup = super::install::setup(what, python);
            process.wrap.setup.push(setup);
        }
        let endpoint = format!("dyn://{}.{}.generate", self.namespace, component(role));
        let mut registration = vec![
            ("--endpoint", endpoint.as_str()),
            ("--discovery-backend", "etcd"),
            ("--disaggregation-mode", mode(role)),
        ];
        registration.extend(self.planes.worker_flags(&process.env));
        // The wrapper's own parser takes what its catalog holds; the rest is its engine's
        // flag, which the engine renders (`dynamo.sglang` reads SGLang's own
        // `--disaggregation-mode`; `dynamo.vllm` has one of its own).
        let wrapper = wrapper_catalog(&process.argv);
        let own_option = |flag: &str| match wrapper.map(|c| c.resolve(&flag[2..])) {
            Some(Resolution::Exact(o, _)) => Some(o),
            _ => None,
        };
        if headless {
            // A follower node runs engine ranks for its endpoint's leader, which registers
            // for the whole endpoint. One whose wrapper still connects to the runtime gets
            // its address, and the registration through the variables its wrapper's
            // parser reads each flag's default from: under `--simulate` the engine's
            // simulator stands in for it, and takes the engine's flags alone.
            if serving.follower_connects {
                self.connect(ctx, process);
                for (flag, value) in &registration {
                    if let Some(var) = own_option(flag).and_then(|o| o.env_var.as_deref()) {
                        process.env.insert(var.into(), (*value).into());
                    }
                }
            }
            return Ok(());
        }
        self.connect(ctx, process);
        process.argv.extend(own.iter().map(String::as_str));
        self.register(process, wrapper, &registration)?;
        let listed = match self.planes.request {
            Transport::Nats => self.learned_instance(ctx, process, role)?,
            _ => self.tcp_instance(ctx, process, role)?,
        };
        let python = process.argv.program().unwrap_or("python3").to_string();
        // A worker whose program is the mocker already is its own stand-in.
        let simulated = match wrapper.and_then(|c| c.command.last()) {
            Some(module) if module == MOCKER => process.argv.clone(),
            _ => mocker(&python, serving, role, &registration),
        };
        let info = process.worker.as_mut().expect("a worker");
        info.health = Some(listed);
        info.simulated = Some(simulated);
        Ok(())
    }
}

/// The catalog of the Dynamo wrapper `argv` runs (`python3 -m dynamo.vllm`), if srt
/// has one.
fn wrapper_catalog(argv: &Argv) -> Option<&'static Catalog> {
    super::catalogs().iter().find(|c| {
        argv.iter()
            .take(c.command.len())
            .eq(c.command.iter().map(String::as_str))
    })
}

impl DynamoRuntime {
    /// Where a worker's runtime finds the deployment: its etcd (and nats-server), and
    /// the address it publishes its events on.
    /// Give a worker's command `registration` as its wrapper (`wrapper`, its catalog)
    /// takes it: in the older form of the recipe's release ([`registration`]), else each
    /// flag the wrapper's own parser has (every one, for a wrapper srt has no catalog of;
    /// the rest is its engine's, which the engine renders).
    fn register(
        &self,
        process: &mut LaunchProcess,
        wrapper: Option<&Catalog>,
        registration: &[(&str, &str)],
    ) -> Result<(), String> {
        let module = wrapper.and_then(|c| c.command.last());
        if let Some(takes) =
            module.and_then(|m| registration::older_form(self.release.as_deref(), m))
        {
            let release = self.release.as_deref().unwrap_or_default();
            let older = registration::older(takes, registration, &self.namespace)
                .map_err(|e| format!("ai-dynamo {release}: {e}"))?;
            process.argv.extend(older.words.iter().map(String::as_str));
            process.env.extend(older.env);
            return Ok(());
        }
        for (flag, value) in registration {
            let own = wrapper.map(|c| matches!(c.resolve(&flag[2..]), Resolution::Exact(..)));
            if own != Some(false) {
                process.argv.extend([*flag, *value]);
            }
        }
        Ok(())
    }

    fn connect(&self, ctx: &BuildContext<'_>, process: &mut LaunchProcess) {
        let ip = ctx.node_ip(process.node);
        process
            .env
            .insert("ETCD_ENDPOINTS".into(), self.etcd.clone());
        process.env.insert("DYN_EVENT_PLANE_HOST".into(), ip);
        if let Some(nats) = &self.nats {
            process.env.insert("NATS_SERVER".into(), nats.clone());
        }
    }

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

/// The Dynamo mocker's module.
const MOCKER: &str = "dynamo.mocker";

/// The Dynamo mocker serving `serving` in `role`, registered as the worker would be,
/// scheduling as its engine does (`--engine-type`).
fn mocker(python: &str, serving: &Serving, role: RoleKind, registration: &[(&str, &str)]) -> Argv {
    let mut argv = Argv::from([python, "-m", MOCKER]);
    argv.extend(["--model-path", &serving.model_path]);
    argv.extend(["--model-name", &serving.served_name]);
    argv.extend(["--engine-type", serving.family]);
    argv.extend(
        registration
            .iter()
            .flat_map(|(flag, value)| [*flag, *value]),
    );
    for (flag, value) in [
        ("--block-size", &serving.block_size),
        ("--max-num-seqs", &serving.max_num_seqs),
        ("--max-num-batched-tokens", &serving.max_num_batched_tokens),
    ] {
        if let Some(v) = value {
            argv.extend([flag, v.as_str()]);
        }
    }
    if serving.data_parallel > 1 {
        argv.extend(["--data-parallel-size", &serving.data_parallel.to_string()]);
    }
    // One port per mocker worker (it runs one), whatever its DP ranks: where its
    // decodes rendezvous with it.
    if let (RoleKind::Prefill, Some(port)) = (role, serving.bootstrap_port) {
        argv.extend(["--bootstrap-ports", &port.to_string()]);
    }
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mocker_schedules_as_the_engine_and_a_prefill_rendezvous_on_one_port() {
        let serving = Serving {
            model_path: "/models/tiny".into(),
            served_name: "tiny".into(),
            block_size: Some("16".into()),
            max_num_batched_tokens: None,
            max_num_seqs: None,
            data_parallel: 2,
            bootstrap_port: Some(14500),
            family: "sglang",
            follower_connects: false,
        };
        let registration = [
            ("--endpoint", "dyn://t.prefill.generate"),
            ("--discovery-backend", "etcd"),
            ("--disaggregation-mode", "prefill"),
        ];
        let prefill = mocker("python3", &serving, RoleKind::Prefill, &registration);
        assert_eq!(
            prefill.to_vec(),
            [
                "python3",
                "-m",
                "dynamo.mocker",
                "--model-path",
                "/models/tiny",
                "--model-name",
                "tiny",
                "--engine-type",
                "sglang",
                "--endpoint",
                "dyn://t.prefill.generate",
                "--discovery-backend",
                "etcd",
                "--disaggregation-mode",
                "prefill",
                "--block-size",
                "16",
                "--data-parallel-size",
                "2",
                "--bootstrap-ports",
                "14500",
            ]
        );
        // A decode rendezvous at its prefill's port: it listens on none.
        let decode = mocker("python3", &serving, RoleKind::Decode, &registration);
        assert!(
            !decode.iter().any(|w| w == "--bootstrap-ports"),
            "{decode:?}"
        );
    }

    #[test]
    fn a_wrappers_catalog_is_found_by_its_command_and_names_its_flags_variables() {
        let of = |argv: &[&str]| wrapper_catalog(&argv.iter().copied().collect());
        let sglang = of(&["python3", "-m", "dynamo.sglang", "--model-path", "m"]).unwrap();
        let vllm = of(&["python3", "-m", "dynamo.vllm", "--model", "m"]).unwrap();
        assert_eq!(
            (sglang.program.as_str(), vllm.program.as_str()),
            ("dynamo-sglang", "dynamo-vllm")
        );
        assert!(of(&["python3", "-m", "sglang.launch_server"]).is_none());
        let exact = |c: &'static Catalog, flag: &str| match c.resolve(flag) {
            Resolution::Exact(o, _) => o.env_var.as_deref(),
            _ => None,
        };
        // `dynamo.sglang` reads SGLang's `--disaggregation-mode`; `dynamo.vllm` has one.
        assert!(!matches!(
            sglang.resolve("disaggregation-mode"),
            Resolution::Exact(..)
        ));
        assert!(matches!(
            vllm.resolve("disaggregation-mode"),
            Resolution::Exact(..)
        ));
        for (flag, var) in [
            ("endpoint", "DYN_ENDPOINT"),
            ("discovery-backend", "DYN_DISCOVERY_BACKEND"),
            ("request-plane", "DYN_REQUEST_PLANE"),
            ("event-plane", "DYN_EVENT_PLANE"),
        ] {
            assert_eq!(exact(sglang, flag), Some(var), "{flag}");
        }
    }
}
