//! Recipe -> launch plan: validate, allocate endpoints, build workers and frontends.

use super::{node_ip, node_name, Gate, LaunchPlan, NodeSlot, Probe, FORMAT_VERSION};
use crate::engine::{self, connector, connector::DiscoveryTarget, Engine};
use crate::frontend::{self, RoleConnector};
use crate::ports::{PortAllocator, PortBlock, DISCOVERY, DISCOVERY_PORT, PUBLIC};
use crate::recipe::diag::{did_you_mean, Problem};
use crate::recipe::{Nodes, Recipe, RoleKind};
use crate::secrets;
use crate::topology;

/// How hosts map to nodes when allocating per-node ports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HostLayout {
    /// Every node is its own host (a cluster).
    #[default]
    Distinct,
    /// All nodes share one host (the local executor): per-node port kinds never repeat.
    Shared,
}

/// Options for [`build`].
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    /// Nodes available (`None`: exactly as many as the roles need).
    pub nodes: Option<usize>,
    /// Host layout.
    pub hosts: HostLayout,
}

/// Shared state while building one launch plan.
pub struct Ctx<'r> {
    /// The recipe.
    pub recipe: &'r Recipe,
    /// The port allocator.
    pub alloc: PortAllocator,
    /// Host key of each node.
    pub hosts: Vec<String>,
    /// Where discovery-connector workers register, when one is in use.
    pub discovery: Option<DiscoveryTarget>,
}

impl Ctx<'_> {
    /// Host key of node `i`.
    pub fn host(&self, node: usize) -> &str {
        &self.hosts[node]
    }
}

/// Build the launch plan. All problems found are returned together.
pub fn build(recipe: &Recipe, options: &BuildOptions) -> Result<LaunchPlan, Vec<Problem>> {
    let mut problems = Vec::new();
    let engine = engine::lookup(&recipe.engine.kind.value);
    let frontend = frontend::lookup(&recipe.frontend.kind.value);
    if frontend.is_none() {
        let names = frontend::FRONTENDS.iter().map(|f| f.name());
        let p = Problem::new(
            "srt::recipe::frontend",
            recipe.frontend.kind.span,
            format!("unknown frontend type `{}`", recipe.frontend.kind.value),
        )
        .label("unknown frontend");
        problems.push(
            match did_you_mean(&recipe.frontend.kind.value, names.clone()) {
                Some(s) => p.help(format!("did you mean `{s}`?")),
                None => p.help(format!(
                    "known frontends: {}",
                    names.collect::<Vec<_>>().join(", ")
                )),
            },
        );
    }
    if recipe.roles.is_empty() {
        // The loader refuses this; a hand-built Recipe must not reach the allocator,
        // which has no node to put the frontend on.
        problems.push(
            Problem::new(
                "srt::recipe::no_roles",
                recipe.name.span,
                "the recipe declares no role",
            )
            .label("this deployment")
            .help("add `roles.agg`, or `roles.prefill` and `roles.decode`"),
        );
        return Err(problems);
    }
    check_roles(recipe, &mut problems);
    check_secret_args(recipe, &mut problems);
    let mut connectors = Vec::new();
    for role in &recipe.roles {
        match connector::for_role(recipe, role) {
            Ok(c) => connectors.push(RoleConnector {
                role: role.kind,
                connector: c,
                span: role
                    .connector
                    .as_ref()
                    .map(|s| s.span)
                    .unwrap_or(recipe.engine.connector.span),
            }),
            // Roles without an override share `engine.connector`: report it once.
            Err(p) => {
                if !problems
                    .iter()
                    .any(|q| q.code == p.code && q.span == p.span)
                {
                    problems.push(p)
                }
            }
        }
    }
    if let Some(engine) = engine {
        check_managed(recipe, engine, &connectors, &mut problems);
    }
    if let Some(fe) = frontend {
        if !fe.supports_discovery() {
            for c in connectors.iter().filter(|c| c.connector.discovery) {
                problems.push(
                    Problem::new(
                        "srt::recipe::discovery_frontend",
                        c.span,
                        format!(
                            "connector `{}` needs a frontend that discovers workers; `{}` does not",
                            c.connector.name,
                            fe.name()
                        ),
                    )
                    .label("discovery connector"),
                );
            }
        }
        fe.validate(recipe, &connectors, &mut problems);
    }
    let (Some(engine), Some(frontend)) = (engine, frontend) else {
        return Err(problems);
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    let topo = topology::allocate(recipe, options.nodes)?;
    let hosts: Vec<String> = (0..topo.node_count)
        .map(|i| match options.hosts {
            HostLayout::Distinct => node_name(i),
            HostLayout::Shared => "localhost".to_string(),
        })
        .collect();
    let mut ctx = Ctx {
        recipe,
        alloc: PortAllocator::new(hosts.clone()),
        hosts,
        discovery: None,
    };
    for role in &recipe.roles {
        engine.validate_role(&ctx, role, &mut problems);
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let layout = frontend.layout(recipe, &topo);
    let fe = &recipe.frontend;
    let public_node = layout.public_node();
    let public_owner = layout
        .nginx_node
        .map(|_| "nginx".to_string())
        .unwrap_or_else(|| "router[0]".into());
    let public_host = ctx.host(public_node).to_string();
    if let Err(e) = ctx.alloc.reserve(
        &public_host,
        PUBLIC,
        PortBlock {
            base: fe.port.value,
            count: 1,
        },
        &public_owner,
    ) {
        return Err(vec![Problem::new(
            "srt::recipe::ports",
            fe.port.span,
            e.to_string(),
        )
        .label("public port")]);
    }
    if connectors.iter().any(|c| c.connector.discovery) {
        let node = layout.routers[0].node;
        let host = ctx.host(node).to_string();
        if ctx
            .alloc
            .reserve(
                &host,
                DISCOVERY,
                PortBlock {
                    base: DISCOVERY_PORT,
                    count: 1,
                },
                "router[0]",
            )
            .is_err()
        {
            // Only the public port is reserved before the discovery listener, and a
            // discovery Router is the public one: the clash is always `frontend.port`.
            return Err(vec![Problem::new(
                "srt::recipe::ports",
                fe.port.span,
                format!(
                    "`frontend.port` {} is the Router's worker-discovery port",
                    fe.port.value
                ),
            )
            .label("collides with the discovery listener")
            .help(format!(
                "the Router listens for worker registrations on {DISCOVERY_PORT}; choose another public port"
            ))]);
        }
        ctx.discovery = Some(DiscoveryTarget {
            ip: node_ip(node),
            port: DISCOVERY_PORT,
        });
    }
    let mut workers = Vec::new();
    for endpoint in &topo.endpoints {
        let role = recipe
            .roles
            .iter()
            .find(|r| r.kind == endpoint.role)
            .expect("endpoint of a declared role");
        let conn = connectors
            .iter()
            .find(|c| c.role == role.kind)
            .expect("resolved")
            .connector;
        match engine.worker_processes(&mut ctx, role, conn, endpoint) {
            Ok(p) => workers.extend(p),
            Err(p) => {
                // One problem per role is enough: every endpoint of a role shares its args.
                if !problems
                    .iter()
                    .any(|q: &Problem| q.span == p.span && q.code == p.code)
                {
                    problems.push(p);
                }
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let parts = frontend
        .build(&mut ctx, &layout, &workers, &connectors)
        .map_err(|p| vec![p])?;
    let mut gates = parts.gates;
    let mut smoke_deps: Vec<String> = gates.iter().map(|g| g.address.clone()).collect();
    if layout.nginx_node.is_some() {
        smoke_deps.push(frontend::nginx::ADDRESS.to_string());
    }
    gates.push(Gate {
        address: "smoke".into(),
        description: "a one-token completion through the public URL succeeds".into(),
        probe: Probe::Completion {
            url: parts.public_url.clone(),
            model: recipe.model.served_name.clone(),
        },
        depends_on: smoke_deps,
    });
    if let Some(b) = &recipe.benchmark {
        gates.push(Gate {
            address: "benchmark".into(),
            description: format!(
                "{} load: {}-token prompts, {} output tokens, concurrency {:?}",
                b.kind, b.isl, b.osl, b.concurrencies
            ),
            probe: Probe::Benchmark {
                url: parts.public_url.clone(),
                model: recipe.model.served_name.clone(),
                isl: b.isl,
                osl: b.osl,
                concurrencies: b.concurrencies.clone(),
                requests_per_concurrency: b.requests_per_concurrency,
            },
            depends_on: vec!["smoke".into()],
        });
    }
    let mut processes = workers;
    processes.extend(parts.processes);
    Ok(LaunchPlan {
        format_version: FORMAT_VERSION,
        deployment: recipe.name.value.clone(),
        frontend: frontend.name().to_string(),
        served_model_name: recipe.model.served_name.clone(),
        precision: recipe.model.precision.clone(),
        gpu_type: recipe.resources.gpu_type.clone(),
        nodes: (0..topo.node_count)
            .map(|i| NodeSlot {
                index: i,
                name: node_name(i),
                ip: node_ip(i),
                gpus: topo.gpus_per_node,
            })
            .collect(),
        processes,
        gates,
        public_url: parts.public_url,
        leases: ctx.alloc.leases().to_vec(),
        sensitive_env: recipe.sensitive_env.clone(),
    })
}

/// Role-mix rules: agg or prefill+decode, `colocate` only on decode with explicit GPUs.
fn check_roles(recipe: &Recipe, problems: &mut Vec<Problem>) {
    let has = |k: RoleKind| recipe.roles.iter().find(|r| r.kind == k);
    match (
        has(RoleKind::Prefill),
        has(RoleKind::Decode),
        has(RoleKind::Agg),
    ) {
        (_, _, Some(agg))
            if has(RoleKind::Prefill).is_some() || has(RoleKind::Decode).is_some() =>
        {
            problems.push(
                Problem::new("srt::recipe::role_mix", agg.span, "a recipe is either aggregated (`agg`) or disaggregated (`prefill` + `decode`), not both")
                    .label("agg next to prefill/decode")
                    .help("remove `agg`, or remove `prefill` and `decode`"),
            );
        }
        (Some(p), None, None) => problems.push(
            Problem::new(
                "srt::recipe::role_mix",
                p.span,
                "`prefill` needs a `decode` role",
            )
            .label("prefill without decode")
            .help("add `roles.decode`"),
        ),
        (None, Some(d), None) => problems.push(
            Problem::new(
                "srt::recipe::role_mix",
                d.span,
                "`decode` needs a `prefill` role",
            )
            .label("decode without prefill")
            .help("add `roles.prefill`"),
        ),
        _ => {}
    }
    for role in &recipe.roles {
        if role.nodes.value == Nodes::Colocate {
            if role.kind != RoleKind::Decode {
                problems.push(
                    Problem::new(
                        "srt::recipe::colocate",
                        role.nodes.span,
                        format!(
                            "`nodes: colocate` is only allowed on decode, not on {}",
                            role.kind.name()
                        ),
                    )
                    .label("colocate here")
                    .help("give this role a node count"),
                );
                continue;
            }
            for other in recipe.roles.iter().filter(|r| r.kind == RoleKind::Prefill) {
                if other.gpus.is_none() {
                    problems.push(
                        Problem::new(
                            "srt::recipe::colocate_gpus",
                            other.span,
                            "colocated decode needs an explicit `gpus` on prefill too",
                        )
                        .label("prefill without `gpus`")
                        .help("set `gpus` per worker on both prefill and decode"),
                    );
                }
            }
        }
    }
}

/// A flag named like a secret (`api-key`, `hf-token`, anything matching the sensitive
/// patterns of [`secrets`]) would put its value on a command line, where `ps` and a
/// scheduler's job records show it to every user: refused, the value belongs in `env`.
fn check_secret_args(recipe: &Recipe, problems: &mut Vec<Problem>) {
    let roles = recipe
        .roles
        .iter()
        .map(|r| (format!("roles.{}", r.kind.name()), &r.args));
    let frontend = std::iter::once(("frontend".to_string(), &recipe.frontend.args));
    for (path, args) in roles.chain(frontend) {
        for arg in &args.0 {
            let as_env = arg.key.replace('-', "_");
            if secrets::is_sensitive(&as_env) {
                problems.push(
                    Problem::new(
                        "srt::recipe::secret_arg",
                        arg.key_span,
                        format!(
                            "`{path}.args.{}` would put a secret on the command line",
                            arg.key
                        ),
                    )
                    .label("secret as a flag")
                    .help(format!(
                        "command lines are visible to every user (`ps`, scheduler job records); \
                         pass the secret in `{path}.env` instead (vLLM reads `VLLM_API_KEY` for \
                         `--api-key`, Hugging Face tools read `HF_TOKEN`)"
                    )),
                );
            }
        }
    }
}

/// Recipes may not set what the topology derives, nor pass a raw kv-transfer-config next
/// to a connector.
fn check_managed(
    recipe: &Recipe,
    engine: &dyn Engine,
    connectors: &[RoleConnector],
    problems: &mut Vec<Problem>,
) {
    for role in &recipe.roles {
        let path = format!("roles.{}", role.kind.name());
        for arg in &role.args.0 {
            if engine.managed_flags().contains(&arg.key.as_str()) {
                problems.push(
                    Problem::new("srt::recipe::managed_flag", arg.key_span, format!("`{path}.args.{}` is derived from the topology by srt", arg.key))
                        .label("managed by srt")
                        .help("remove it; srt sets ports, addresses, ranks and devices from the allocation"),
                );
            }
        }
        for key in role.env.keys() {
            if engine.managed_env().contains(&key.as_str()) {
                problems.push(
                    Problem::new(
                        "srt::recipe::managed_env",
                        role.env_spans.get(key).copied().unwrap_or(role.span),
                        format!("`{path}.env.{key}` is set by srt from the allocation"),
                    )
                    .label("managed by srt")
                    .help("remove it; srt allocates this value per process"),
                );
            }
        }
        if let Some(arg) = role.args.get("kv-transfer-config") {
            let conn = connectors.iter().find(|c| c.role == role.kind);
            if conn.is_some_and(|c| c.connector.kv_connector.is_some()) {
                problems.push(
                    Problem::new(
                        "srt::recipe::kv_transfer_config",
                        arg.key_span,
                        format!("`{path}.args.kv-transfer-config` conflicts with connector `{}`", conn.map(|c| c.connector.name).unwrap_or_default()),
                    )
                    .label("raw connector config")
                    .help("choose the connector with `engine.connector` / `args.connector`, or set `args.connector: none` to pass your own config"),
                );
            }
        }
    }
}
