//! NVIDIA Dynamo's frontend (`python3 -m dynamo.frontend`, ai-dynamo 1.6.1): an
//! OpenAI-compatible server whose workers register themselves in a discovery store
//! (etcd) and which routes to whatever is registered under its namespace.
//!
//! Its build has both phases: the infrastructure (etcd on the head node, its gate, and
//! the runtime the workers run under: the engine's Dynamo wrapper, registered under the
//! deployment's own namespace with a request-plane port srt allocates), then the entry
//! processes (one frontend, or several behind nginx) and the readiness gates. srt never
//! lists workers to it: membership is self-registration, which srt observes in the
//! frontend's `/health` (a worker serves once it is listed there), and a stopped worker
//! deregisters itself on SIGTERM and finishes what it was serving. What was observed
//! running all of it here: `docs/dynamo-notes.md`.

mod install;
mod registration;
mod release;
mod runtime;
mod section;

use super::{nginx, Frontend, FrontendParts, Infrastructure, Layout, OwnedSection, WrapperFlags};
use crate::catalog::Catalog;
use crate::launch::wrap::Wrap;
use crate::launch::{
    Argv, BuildContext, Component, ConnectorChoice, Field, Gate, LaunchProcess, Listed, PdProtocol,
    Probe, ProcessKind, Services,
};
use crate::ports::{
    PortBlock, ETCD_CLIENT, ETCD_PEER, FRONTEND_INTERNAL, NATS_CLIENT, NATS_MONITOR, PUBLIC,
};
use crate::recipe::diag::Problem;
use crate::recipe::{ArgValue, Recipe};
use std::collections::BTreeMap;

/// The Dynamo frontend.
pub(super) struct Dynamo;

/// The frontend process: the entry point clients use.
static FRONTEND: Component = Component {
    name: "frontend",
    install_hint: None,
    reloads_files: false,
    scratch_dirs: &[],
};

/// etcd, the discovery store the workers register in.
static ETCD: Component = Component {
    name: "etcd",
    install_hint: Some(
        "install etcd (Debian: `apt-get install etcd-server`, or `scripts/install-deps.sh etcd`)",
    ),
    reloads_files: false,
    scratch_dirs: &[],
};

/// nats-server, the request and event planes when the recipe puts either on NATS.
static NATS: Component = Component {
    name: "nats",
    install_hint: Some(
        "install nats-server (Debian: `apt-get install nats-server`, or `scripts/install-deps.sh nats`)",
    ),
    reloads_files: false,
    scratch_dirs: &[],
};

static COMPONENTS: &[&Component] = &[&FRONTEND, &ETCD, &NATS];

/// `--migration-limit` when `frontend.args` does not set it. When a worker deregisters
/// (a roll or a scale-down SIGTERMs it), the frontend cancels the requests it had just
/// sent there ("worker_disconnected"); with a limit it sends them to another worker,
/// with none (Dynamo's default, 0) they fail with 503. Three tries cover a roll.
const MIGRATION_LIMIT: &str = "3";

/// Address of the etcd process.
const ETCD_ADDRESS: &str = "etcd";

/// Address of the nats-server process.
const NATS_ADDRESS: &str = "nats";

/// Service names in [`Services::endpoints`].
const ETCD_SERVICE: &str = "etcd";
const NATS_SERVICE: &str = "nats";

/// Flags of `dynamo.frontend` srt sets, and why.
const MANAGED: &[(&str, &str)] = &[
    ("http-host", "the frontend listens on 0.0.0.0"),
    (
        "http-port",
        "the frontend's port is `frontend.port` (or an internal port behind nginx)",
    ),
    (
        "namespace",
        "every deployment has its own Dynamo namespace, named after it",
    ),
    (
        "discovery-backend",
        "the workers register in the deployment's own etcd",
    ),
    ("request-plane", "it is `dynamo.request_plane`"),
    ("event-plane", "it is `dynamo.event_plane`"),
];

/// Environment srt sets for Dynamo's processes (the runtime reads it), and why.
const MANAGED_ENV: &[(&str, &str)] = &[
    (
        "ETCD_ENDPOINTS",
        "the deployment's own etcd, which srt starts on the head node",
    ),
    (
        "NATS_SERVER",
        "the deployment's own nats-server, which srt starts when `dynamo:` puts a plane on NATS",
    ),
    ("DYN_REQUEST_PLANE", "it is `dynamo.request_plane`"),
    ("DYN_EVENT_PLANE", "it is `dynamo.event_plane`"),
    (
        "DYN_SYSTEM_PORT",
        "each worker's system server port is allocated (port kind `runtime_system`)",
    ),
    (
        "DYN_SYSTEM_HOST",
        "each worker's system server listens on its node's address",
    ),
    (
        "DYN_NAMESPACE",
        "every deployment has its own Dynamo namespace",
    ),
    (
        "DYN_ENDPOINT",
        "each role registers at `dyn://<deployment>.<backend|prefill>.generate`",
    ),
    ("DYN_DISCOVERY_BACKEND", "the workers register in etcd"),
    (
        "DYN_TCP_RPC_HOST",
        "each worker's request plane listens on its node's address",
    ),
    (
        "DYN_TCP_RPC_PORT",
        "each worker's request-plane port is allocated (port kind `runtime_rpc`)",
    ),
    (
        "DYN_EVENT_PLANE_HOST",
        "each worker publishes its events on its node's address",
    ),
];

/// A role's `env` may name [`section::REQUEST_PLANE_VAR`], as 14 of srtctl's recipes do:
/// its workers are then also given `--request-plane`, which the wrappers read over the
/// variable (see [`section::Planes::worker_flags`]), so a value other than the
/// deployment's plane is a warning that it is not the plane the workers serve on.
fn request_plane_vars(recipe: &Recipe, problems: &mut Vec<Problem>) {
    let plane = section::planes(recipe).request.name();
    for role in &recipe.roles {
        let var = section::REQUEST_PLANE_VAR;
        let (Some(value), Some(span)) = (role.env.get(var), role.env_spans.get(var)) else {
            continue;
        };
        if value == plane {
            continue;
        }
        problems.push(
            Problem::warning(
                "srt::recipe::request_plane_var",
                *span,
                format!(
                    "the {} workers serve requests on `{plane}`, not `{value}`: srt also gives them `--request-plane {plane}` (`dynamo.request_plane`), as srtctl does, and Dynamo's wrappers read the flag over `{var}`",
                    role.kind.name()
                ),
            )
            .label("only the flag's default")
            .help(format!(
                "to put the request plane on `{value}`, set `dynamo.request_plane: {value}`; otherwise remove the variable"
            )),
        );
    }
}

/// The catalogs of the programs it runs besides the frontend (whose releases'
/// catalogs are [`release`]'s): etcd, nats-server, the mocker, and the own flags of
/// `dynamo.vllm` and `dynamo.sglang` (each leaves the rest to its engine's parser) and
/// of `dynamo.trtllm` (which takes no engine flags).
fn catalogs() -> &'static [Catalog] {
    static PARSED: std::sync::OnceLock<Vec<Catalog>> = std::sync::OnceLock::new();
    PARSED.get_or_init(|| {
        [
            include_str!("catalog/etcd-3.4.23.json"),
            include_str!("catalog/nats-server-2.9.10.json"),
            include_str!("catalog/dynamo-mocker-1.6.1.json"),
            include_str!("catalog/dynamo-vllm-1.6.1.json"),
            include_str!("catalog/dynamo-sglang-1.6.1.json"),
            include_str!("catalog/dynamo-trtllm-1.6.1.json"),
        ]
        .iter()
        .map(|text| Catalog::parse(text).expect("the shipped catalog parses"))
        .collect()
    })
}

fn catalog() -> &'static Catalog {
    release::default()
}

/// The deployment's Dynamo namespace: its name, with what a `dyn://` path cannot hold
/// (its separator `.`) made a dash.
fn namespace(recipe: &Recipe) -> String {
    recipe
        .name
        .value
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' => c,
            _ => '-',
        })
        .collect()
}

impl Frontend for Dynamo {
    fn name(&self) -> &'static str {
        "dynamo"
    }

    fn default_binary(&self) -> &'static str {
        "python3"
    }

    fn install_hint(&self) -> &'static str {
        "install ai-dynamo with `scripts/install-dynamo.sh` and put its venv first on PATH \
         (`export PATH=\"$PWD/.tools/dynamo-venv/bin:$PATH\"`), so that `python3` imports \
         `dynamo`; or name the interpreter with `frontend.binary`"
    }

    fn entry(&self) -> &'static Component {
        &FRONTEND
    }

    fn components(&self) -> &'static [&'static Component] {
        COMPONENTS
    }

    fn catalog(&self) -> &'static Catalog {
        catalog()
    }

    fn args_catalog(&self, recipe: &Recipe) -> &'static Catalog {
        release::of(recipe)
    }

    fn managed_by(&self, flag: &str) -> Option<&'static str> {
        crate::catalog::managed_by(MANAGED, flag)
    }

    fn program_catalogs(&self) -> Vec<&'static Catalog> {
        std::iter::once(catalog()).chain(catalogs()).collect()
    }

    fn section(&self) -> Option<&'static OwnedSection> {
        Some(&section::SECTION)
    }

    fn worker_runtime(&self) -> Option<&'static str> {
        Some(runtime::NAME)
    }

    fn runs_services(&self) -> bool {
        true
    }

    fn wrapper_flags(&self, program: &[&str]) -> Option<WrapperFlags> {
        let catalog = catalogs().iter().find(|c| c.command == program)?;
        Some(WrapperFlags {
            catalog,
            managed_by: |flag| crate::catalog::managed_by(runtime::MANAGED, flag),
        })
    }

    /// The runtime's wrappers pair prefill and decode workers themselves, whatever
    /// their engine's hand-off: the frontend only routes to the runtime.
    fn pd_protocols(&self) -> &'static [PdProtocol] {
        &[
            PdProtocol::KvTransferParams,
            PdProtocol::Recompute,
            PdProtocol::Bootstrap,
            PdProtocol::DisaggregatedParams,
        ]
    }

    fn validate(&self, recipe: &Recipe, _: &[ConnectorChoice], problems: &mut Vec<Problem>) {
        section::check(recipe, problems);
        problems.extend(release::unnamed_note(recipe));
        section::check_planes_exist(recipe, release::of(recipe), problems);
        if let Some(mb) = &recipe.nats_max_payload_mb {
            if !section::planes(recipe).nats() {
                problems.push(
                    Problem::warning(
                        "srt::recipe::nats_unread",
                        mb.span,
                        "`infra.nats_max_payload_mb` is not read: no nats-server runs, as neither Dynamo plane is on NATS",
                    )
                    .label("unread")
                    .help("srtctl starts nats-server whatever the planes; srt only when `dynamo.request_plane` or `event_plane` is `nats`"),
                );
            }
        }
        request_plane_vars(recipe, problems);
        let fe = &recipe.frontend;
        let envs = std::iter::once(("frontend.env".to_string(), &fe.env_spans)).chain(
            recipe
                .roles
                .iter()
                .map(|r| (format!("roles.{}.env", r.kind.name()), &r.env_spans)),
        );
        for (key, spans) in envs {
            for (name, span) in spans {
                if key != "frontend.env" && name == section::REQUEST_PLANE_VAR {
                    continue;
                }
                if let Some(why) = crate::catalog::managed_by(MANAGED_ENV, name) {
                    problems.push(
                        Problem::new(
                            "srt::recipe::managed_env",
                            *span,
                            format!("`{key}.{name}` is set by srt under the Dynamo frontend"),
                        )
                        .label("srt-managed")
                        .help(format!("remove it: {why}")),
                    );
                }
            }
        }
    }

    fn infrastructure(
        &self,
        ctx: &mut BuildContext<'_>,
        recipe: &Recipe,
        layout: &Layout,
    ) -> Result<Infrastructure, Problem> {
        let fe = &recipe.frontend;
        let port_problem = |e: crate::ports::PortError| {
            Problem::new("srt::recipe::ports", fe.span, e.to_string())
                .label("while allocating the Dynamo frontend's ports")
        };
        let node = layout.services_node();
        let ip = ctx.node_ip(node);
        let client = ctx
            .allocate(&ETCD_CLIENT, node, 1, ETCD_ADDRESS)
            .map_err(port_problem)?;
        let peer = ctx
            .allocate(&ETCD_PEER, node, 1, ETCD_ADDRESS)
            .map_err(port_problem)?;
        let etcd_url = format!("http://{ip}:{}", client.base);
        let mut processes = vec![etcd_process(ctx, recipe, node, client, peer)];
        let mut services = Services {
            endpoints: BTreeMap::from([(ETCD_SERVICE.to_string(), etcd_url.clone())]),
            providers: vec![ETCD_ADDRESS.to_string()],
        };
        let planes = section::planes(recipe);
        let mut gates = vec![Gate {
            address: "gate.etcd".into(),
            description: "etcd answers /health".into(),
            probe: Probe::Http {
                urls: vec![etcd_url.clone()],
                path: "/health".into(),
            },
            depends_on: vec![ETCD_ADDRESS.into()],
        }];
        let mut nats_url = None;
        if planes.nats() {
            let port = ctx
                .allocate(&NATS_CLIENT, node, 1, NATS_ADDRESS)
                .map_err(port_problem)?;
            let monitor = ctx
                .allocate(&NATS_MONITOR, node, 1, NATS_ADDRESS)
                .map_err(port_problem)?;
            let url = format!("nats://{ip}:{}", port.base);
            let payload = recipe.nats_max_payload_mb.as_ref().map(|mb| mb.value);
            processes.push(nats_process(&ip, node, port, monitor, payload));
            gates.push(Gate {
                address: "gate.nats".into(),
                description: "nats-server answers /healthz".into(),
                probe: Probe::Http {
                    urls: vec![format!("http://{ip}:{}", monitor.base)],
                    path: "/healthz".into(),
                },
                depends_on: vec![NATS_ADDRESS.into()],
            });
            services.endpoints.insert(NATS_SERVICE.into(), url.clone());
            services.providers.push(NATS_ADDRESS.into());
            nats_url = Some(url);
        }
        let entries = entry_urls(ctx, recipe, layout).map_err(port_problem)?;
        for (i, (url, _)) in entries.iter().enumerate() {
            services.endpoints.insert(entry_address(i), url.clone());
        }
        let runtime = runtime::DynamoRuntime {
            namespace: namespace(recipe),
            etcd: etcd_url,
            nats: nats_url,
            planes,
            frontends: entries.iter().map(|(url, _)| url.clone()).collect(),
            install: install::install(recipe),
            release: release::named(recipe),
        };
        Ok(Infrastructure {
            processes,
            gates,
            services,
            runtime: Some(Box::new(runtime)),
        })
    }

    fn build(
        &self,
        ctx: &mut BuildContext<'_>,
        recipe: &Recipe,
        layout: &Layout,
        workers: &[LaunchProcess],
        _: &[ConnectorChoice],
    ) -> Result<FrontendParts, Problem> {
        let fe = &recipe.frontend;
        let services = ctx.services().clone();
        let etcd = &services.endpoints[ETCD_SERVICE];
        let program = fe.binary.as_deref().unwrap_or(self.default_binary());
        let catalog = release::of(recipe);
        let user = user_flags(recipe, catalog);
        // The flags srt sets that the release's frontend has: etcd discovery and
        // migration are the only (or no) choice before ai-dynamo 1.1.
        let has = |flag: &str| release::has(catalog, flag);
        let setup: Vec<_> = install::install(recipe)
            .map(|what| install::setup(&what, program))
            .into_iter()
            .collect();
        let mut processes = Vec::new();
        let mut urls = Vec::new();
        let mut upstreams = Vec::new();
        for (i, slot) in layout.routers.iter().enumerate() {
            let address = entry_address(i);
            let url = services.endpoints[&address].clone();
            let port = url.rsplit(':').next().unwrap_or_default().to_string();
            let mut argv = Argv::from([program, "-m", "dynamo.frontend"]);
            argv.extend(["--http-host", "0.0.0.0", "--http-port", &port]);
            argv.extend(["--namespace", &namespace(recipe)]);
            if has("--discovery-backend") {
                argv.extend(["--discovery-backend", "etcd"]);
            }
            argv.extend(
                section::planes(recipe)
                    .flags()
                    .into_iter()
                    .flat_map(|(flag, value)| [flag, value]),
            );
            if recipe.frontend.args.get("migration-limit").is_none() && has("--migration-limit") {
                argv.extend(["--migration-limit", MIGRATION_LIMIT]);
            }
            argv.extend(&user);
            let mut env = fe.env.clone();
            env.insert("ETCD_ENDPOINTS".into(), etcd.clone());
            if let Some(nats) = services.endpoints.get(NATS_SERVICE) {
                env.insert("NATS_SERVER".into(), nats.clone());
            }
            let key = if slot.behind_nginx {
                FRONTEND_INTERNAL.name
            } else {
                PUBLIC
            };
            let block = PortBlock {
                base: port.parse().unwrap_or_default(),
                count: 1,
            };
            upstreams.push(url.trim_start_matches("http://").to_string());
            urls.push(url);
            processes.push(LaunchProcess {
                address,
                kind: ProcessKind::Component(&FRONTEND),
                node: slot.node,
                devices: Vec::new(),
                ports: BTreeMap::from([(key.to_string(), block)]),
                env,
                env_unset: Vec::new(),
                argv,
                files: BTreeMap::new(),
                // The workers register themselves: it depends on none of them, and a
                // worker's change never restarts it.
                depends_on: services.providers.clone(),
                watches: Default::default(),
                worker: None,
                wrap: Wrap {
                    setup: setup.clone(),
                    ..Default::default()
                },
                ranks: None,
                container_image: fe
                    .container_image
                    .clone()
                    .or_else(|| ctx.model().container.clone()),
            });
        }
        let entries: Vec<String> = processes.iter().map(|p| p.address.clone()).collect();
        if let Some(node) = layout.nginx_node {
            processes.push(nginx::process(node, fe.port.value, &upstreams, &fe.nginx));
        }
        let public_url = format!(
            "http://{}:{}",
            ctx.node_ip(layout.public_node()),
            fe.port.value
        );
        Ok(FrontendParts {
            gates: gates(recipe, &urls, entries, workers),
            processes,
            memberships: Vec::new(),
            public_url,
            warnings: Vec::new(),
        })
    }
}

/// Address of entry process `i`.
fn entry_address(i: usize) -> String {
    format!("{}[{i}]", FRONTEND.name)
}

/// Each entry process's URL and port: the public port, or an internal one behind nginx.
fn entry_urls(
    ctx: &mut BuildContext<'_>,
    recipe: &Recipe,
    layout: &Layout,
) -> Result<Vec<(String, u16)>, crate::ports::PortError> {
    let mut out = Vec::new();
    for (i, slot) in layout.routers.iter().enumerate() {
        let port = match slot.behind_nginx {
            true => {
                ctx.allocate(&FRONTEND_INTERNAL, slot.node, 1, &entry_address(i))?
                    .base
            }
            false => recipe.frontend.port.value,
        };
        out.push((format!("http://{}:{port}", ctx.node_ip(slot.node)), port));
    }
    Ok(out)
}

/// `etcd` as one member cluster on `node`, its data under the run directory.
fn etcd_process(
    ctx: &BuildContext<'_>,
    recipe: &Recipe,
    node: usize,
    client: PortBlock,
    peer: PortBlock,
) -> LaunchProcess {
    let ip = ctx.node_ip(node);
    let client_url = format!("http://{ip}:{}", client.base);
    let peer_url = format!("http://{ip}:{}", peer.base);
    let name = namespace(recipe);
    let data_dir = format!("{}/etcd-data", crate::launch::RUN_DIR);
    let cluster = format!("{name}={peer_url}");
    let argv = Argv::from([
        "etcd",
        "--name",
        &name,
        "--data-dir",
        &data_dir,
        "--listen-client-urls",
        &client_url,
        "--advertise-client-urls",
        &client_url,
        "--listen-peer-urls",
        &peer_url,
        "--initial-advertise-peer-urls",
        &peer_url,
        "--initial-cluster",
        &cluster,
    ]);
    let ports = [(&ETCD_CLIENT, client), (&ETCD_PEER, peer)];
    infrastructure_process((ETCD_ADDRESS, &ETCD), node, &ports, argv)
}

/// A process of the frontend's infrastructure (etcd, nats-server): a component on the
/// public node with its ports and command, no environment of the recipe's and no image
/// (Debian's programs, on the host).
fn infrastructure_process(
    (address, component): (&str, &'static Component),
    node: usize,
    ports: &[(&crate::ports::PortKind, PortBlock)],
    argv: Argv,
) -> LaunchProcess {
    LaunchProcess {
        address: address.into(),
        kind: ProcessKind::Component(component),
        node,
        devices: Vec::new(),
        ports: ports
            .iter()
            .map(|(kind, block)| (kind.name.to_string(), *block))
            .collect(),
        env: BTreeMap::new(),
        env_unset: Vec::new(),
        argv,
        files: BTreeMap::new(),
        depends_on: Vec::new(),
        watches: Default::default(),
        wrap: Default::default(),
        ranks: None,
        worker: None,
        container_image: None,
    }
}

/// `nats-server` on `node` with JetStream (Dynamo's event plane keeps streams), its
/// store under the run directory; with `max_payload_mb` (`infra.nats_max_payload_mb`),
/// a configuration file holding that `max_payload` (nats-server has no flag for it; its
/// flags override the file's other settings), as srtctl starts it.
fn nats_process(
    ip: &str,
    node: usize,
    port: PortBlock,
    monitor: PortBlock,
    max_payload_mb: Option<u32>,
) -> LaunchProcess {
    let store = format!("{}/nats-store", crate::launch::RUN_DIR);
    let config = format!("{}/config/nats.conf", crate::launch::RUN_DIR);
    let mut argv = Argv::from(["nats-server"]);
    if max_payload_mb.is_some() {
        argv.extend(["--config", &config]);
    }
    argv.extend([
        "--addr",
        ip,
        "--port",
        &port.base.to_string(),
        "--http_port",
        &monitor.base.to_string(),
        "--jetstream",
        "--store_dir",
        &store,
    ]);
    let ports = [(&NATS_CLIENT, port), (&NATS_MONITOR, monitor)];
    let mut p = infrastructure_process((NATS_ADDRESS, &NATS), node, &ports, argv);
    if let Some(mb) = max_payload_mb {
        let bytes = u64::from(mb) * 1024 * 1024;
        p.files.insert(config, format!("max_payload: {bytes}\n"));
    }
    p
}

/// The recipe's `frontend.args`, sorted, as `dynamo.frontend` of `catalog`'s release
/// parses them.
fn user_flags(recipe: &Recipe, catalog: &Catalog) -> Vec<String> {
    let mut flags: Vec<(String, ArgValue)> = recipe
        .frontend
        .args
        .0
        .iter()
        .map(|a| (a.key.clone(), a.value.clone()))
        .collect();
    flags.sort_by(|a, b| a.0.cmp(&b.0));
    crate::catalog::render(Some(catalog), &flags)
}

/// Every frontend lists every endpoint of every role under the deployment's namespace
/// (its `/health` is healthy with none, and lists every namespace's: only the count of
/// the deployment's own says anything); then it serves the model.
fn gates(
    recipe: &Recipe,
    urls: &[String],
    entries: Vec<String>,
    workers: &[LaunchProcess],
) -> Vec<Gate> {
    let ns = namespace(recipe);
    let lists: Vec<Listed> = recipe
        .roles
        .iter()
        .map(|role| {
            let endpoints = workers
                .iter()
                .filter_map(|w| w.worker.as_ref())
                .filter(|w| w.role == role.kind && !w.headless)
                .count() as u32;
            Listed {
                name: format!("{} workers", role.kind.name()),
                array: "/instances".into(),
                fields: runtime::instance_fields(&ns, role.kind),
                at_least: endpoints,
            }
        })
        .collect();
    let mut depends_on = entries;
    depends_on.extend(workers.iter().map(|w| w.address.clone()));
    let listed = Gate {
        address: "gate.frontend".into(),
        description: format!("every frontend lists every worker registered under namespace `{ns}`"),
        probe: Probe::JsonItems {
            urls: urls.to_vec(),
            path: "/health".into(),
            lists,
        },
        depends_on,
    };
    let model = Gate {
        address: "gate.model".into(),
        description: format!("every frontend serves model `{}`", recipe.model.served_name),
        probe: Probe::JsonItems {
            urls: urls.to_vec(),
            path: "/v1/models".into(),
            lists: vec![Listed {
                name: "models".into(),
                array: "/data".into(),
                fields: vec![Field {
                    pointer: "/id".into(),
                    value: recipe.model.served_name.clone(),
                    prefix: false,
                }],
                at_least: 1,
            }],
        },
        depends_on: vec![listed.address.clone()],
    };
    vec![listed, model]
}
