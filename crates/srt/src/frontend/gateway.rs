//! What the gateways of the SGLang lineage (sglang-router, smg) share: started empty,
//! one per slot of the layout (several behind nginx), in their prefill/decode mode
//! (`--pd-disaggregation`) when the workers serve prefill and decode, else their regular
//! mode; each worker added through the admin API, in its role, once it is healthy;
//! ready once `/readiness` counts every worker healthy. Each frontend brings its
//! program, catalog and rules (the roles and connectors it pairs, the policies it
//! refuses).

use super::{nginx, FrontendParts, Layout};
use crate::catalog::Catalog;
use crate::launch::{
    membership_address, Argv, BuildContext, Count, Gate, LaunchProcess, Member, Membership,
    MembershipMode, Probe, ProcessKind,
};
use crate::recipe::diag::Problem;
use crate::recipe::{ArgValue, Recipe, RoleKind};
use std::collections::BTreeMap;

/// One gateway frontend's facts the shared build needs.
pub(super) struct Gateway {
    /// Its program, when `frontend.binary` does not name one.
    pub default_binary: &'static str,
    /// Its flag catalog.
    pub catalog: &'static Catalog,
    /// The start-up timeout and check-interval flags srt sets by default, in that order.
    pub defaulted: &'static [&'static str],
    /// Its `frontend.type`, in messages.
    pub name: &'static str,
}

/// Flags every gateway gets from the topology, with who sets them.
pub(super) const MANAGED: &[(&str, &str)] = &[
    (
        "worker-urls",
        "the gateway's workers are the role's routable workers",
    ),
    ("host", "the gateway listens on 0.0.0.0"),
    (
        "port",
        "the gateway's port is `frontend.port` (or an internal port behind nginx)",
    ),
    (
        "prometheus-port",
        "each gateway's metrics port is allocated (port kind `router_metrics`)",
    ),
    (
        "prometheus-host",
        "the metrics listener follows the gateway's (0.0.0.0)",
    ),
    ("service-discovery", "srt lists the workers it starts"),
    ("enable-igw", "srt runs the gateway in its regular mode"),
];

/// Who sets `flag` of a gateway whose own managed flags are `own`, or `None` when a
/// recipe may set it.
pub(super) fn managed_by(own: &[(&str, &'static str)], flag: &str) -> Option<&'static str> {
    crate::catalog::managed_by(own, flag).or_else(|| crate::catalog::managed_by(MANAGED, flag))
}

/// The `worker_type` a gateway's `POST /workers` takes for a worker of `role` (none for
/// a regular worker).
pub(super) fn worker_type(role: RoleKind) -> Option<&'static str> {
    match role {
        RoleKind::Agg => None,
        RoleKind::Prefill => Some("prefill"),
        RoleKind::Decode => Some("decode"),
    }
}

/// The flag that starts a gateway in its prefill/decode mode.
const PD_MODE: &str = "--pd-disaggregation";

/// The gateways, their memberships and gates, for the routable `workers`.
pub(super) fn build(
    gateway: &Gateway,
    ctx: &mut BuildContext<'_>,
    recipe: &Recipe,
    layout: &Layout,
    workers: &[LaunchProcess],
) -> Result<FrontendParts, Problem> {
    let fe = &recipe.frontend;
    let members: std::sync::Arc<[Member]> = workers
        .iter()
        .filter_map(|w| {
            let info = w.worker.as_ref()?;
            Some(Member::new(w, info, info.advertised_url.as_ref()?))
        })
        .collect();
    if members.is_empty() {
        return Err(Problem::new(
            "srt::recipe::no_workers",
            fe.span,
            "no worker serves HTTP for the gateway to route to",
        )
        .label("this frontend"));
    }
    check_policy(gateway, recipe)?;
    let disaggregated = members.iter().any(|m| m.role != RoleKind::Agg);
    let user_flags = user_flags(gateway, recipe, ctx.health().timeout_secs);
    let mut processes = Vec::new();
    let mut gateway_urls = Vec::new();
    let mut upstreams = Vec::new();
    for (i, slot) in layout.routers.iter().enumerate() {
        let address = format!("router[{i}]");
        let (ports, port, metrics) = super::router_ports(ctx, fe, *slot, &address)?;
        let binary = fe
            .binary
            .clone()
            .unwrap_or_else(|| gateway.default_binary.to_string());
        let mut argv = Argv::from([binary.as_str(), "launch"]);
        argv.extend([
            "--host",
            "0.0.0.0",
            "--port",
            &port.to_string(),
            "--prometheus-port",
            &metrics.to_string(),
            "--prometheus-host",
            "0.0.0.0",
        ]);
        if disaggregated {
            argv.push(PD_MODE);
        }
        argv.extend(&user_flags);
        let ip = ctx.node_ip(slot.node);
        gateway_urls.push(format!("http://{ip}:{port}"));
        upstreams.push(format!("{ip}:{port}"));
        processes.push(LaunchProcess {
            address,
            kind: ProcessKind::Component(&super::ROUTER),
            node: slot.node,
            devices: Vec::new(),
            ports,
            env: fe.env.clone(),
            env_unset: Vec::new(),
            argv,
            files: BTreeMap::new(),
            // srt adds its workers as they become healthy: it depends on none.
            depends_on: Vec::new(),
            watches: Default::default(),
            worker: None,
            wrap: Default::default(),
            ranks: None,
            container_image: fe
                .container_image
                .clone()
                .or_else(|| ctx.model().container.clone()),
        });
    }
    let addresses: Vec<String> = processes.iter().map(|p| p.address.clone()).collect();
    let public_url = format!(
        "http://{}:{}",
        ctx.node_ip(layout.public_node()),
        fe.port.value
    );
    if let Some(node) = layout.nginx_node {
        processes.push(nginx::process(node, fe.port.value, &upstreams, &fe.nginx));
    }
    let memberships: Vec<Membership> = addresses
        .iter()
        .zip(&gateway_urls)
        .map(|(router, url)| Membership {
            address: membership_address(router),
            router: router.clone(),
            admin_url: url.clone(),
            mode: MembershipMode::Managed,
            note: None,
            members: members.clone(),
        })
        .collect();
    let mut gate_deps = addresses;
    gate_deps.extend(memberships.iter().map(|m| m.address.clone()));
    let gates = gates(gateway_urls, gate_deps, &members);
    Ok(FrontendParts {
        memberships,
        processes,
        gates,
        public_url,
        warnings: Vec::new(),
    })
}

/// `frontend.args` with srt's defaults (the start-up budget from `health_check`, a
/// one-second check interval), sorted and rendered as the gateway reads them.
fn user_flags(gateway: &Gateway, recipe: &Recipe, timeout_secs: u64) -> Vec<String> {
    let mut flags: Vec<(String, ArgValue)> = recipe
        .frontend
        .args
        .0
        .iter()
        .map(|a| (a.key.clone(), a.value.clone()))
        .collect();
    for (key, default) in [
        (gateway.defaulted[0], timeout_secs.to_string()),
        (gateway.defaulted[1], "1".to_string()),
    ] {
        if !flags.iter().any(|(k, _)| k == key) {
            flags.push((key.to_string(), ArgValue::Str(default)));
        }
    }
    flags.sort_by(|a, b| a.0.cmp(&b.0));
    crate::catalog::render(Some(gateway.catalog), &flags)
}

/// Every gateway counts every worker healthy on `/readiness`; then every worker answers
/// its own `/health`.
fn gates(gateway_urls: Vec<String>, gateways: Vec<String>, members: &[Member]) -> Vec<Gate> {
    let n = members.len() as u32;
    let mut deps = vec!["gate.router".to_string()];
    deps.extend(members.iter().map(|m| m.worker.clone()));
    vec![
        Gate {
            address: "gate.router".into(),
            description: format!("every gateway counts {n} healthy workers on /readiness"),
            probe: Probe::JsonCounts {
                urls: gateway_urls,
                path: "/readiness".into(),
                counts: vec![Count {
                    name: "healthy workers".into(),
                    pointers: vec!["/healthy_workers".into()],
                    at_least: n,
                }],
            },
            depends_on: gateways,
        },
        Gate {
            address: "gate.workers".into(),
            description: "every worker listed to the gateway answers /health".into(),
            probe: Probe::Http {
                urls: members.iter().map(|m| m.url.clone()).collect(),
                path: "/health".into(),
            },
            depends_on: deps,
        },
    ]
}

/// The policy flags of the gateways: their own and, in prefill/decode mode, each leg's.
const POLICY_FLAGS: &[&str] = &["policy", "prefill-policy", "decode-policy"];

/// `power_of_two` cannot serve workers kept current at run time: both gateways refuse
/// to start it with fewer than two workers, and srt starts them with none and adds them.
fn check_policy(gateway: &Gateway, recipe: &Recipe) -> Result<(), Problem> {
    let name = gateway.name;
    let power_of_two = POLICY_FLAGS
        .iter()
        .filter_map(|flag| recipe.frontend.args.get(flag))
        .find(|arg| arg.value == ArgValue::Str("power_of_two".into()));
    match power_of_two {
        Some(arg) => Err(Problem::new(
            "srt::recipe::flag_value",
            arg.value_span,
            format!("{name}'s `power_of_two` policy refuses to start with fewer than two workers, while srt starts the gateway with none and adds each worker once it is healthy"),
        )
        .label("not with workers added at run time")
        .help(format!("use one of {}", other_policies(gateway.catalog, arg.key.as_str())))),
        None => Ok(()),
    }
}

/// The choices of the policy flag `key` in `catalog` but `power_of_two`, quoted.
fn other_policies(catalog: &Catalog, key: &str) -> String {
    let choices = match catalog.resolve(key) {
        crate::catalog::Resolution::Exact(o, _) => o.choices.clone().unwrap_or_default(),
        _ => Vec::new(),
    };
    let others: Vec<String> = choices
        .iter()
        .filter(|c| *c != "power_of_two")
        .map(|c| format!("`{c}`"))
        .collect();
    others.join(", ")
}
