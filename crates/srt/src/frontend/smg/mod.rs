//! The Shepherd Model Gateway (`smg`, PyPI) in front of `vllm serve` workers.
//!
//! Regular mode, this stage: `smg launch --host 0.0.0.0 --port P --prometheus-port M
//! --prometheus-host 0.0.0.0 <args>`, with no worker on its command line: srt adds each
//! worker through the admin API ([`admin`]) once it is healthy and takes it out before
//! stopping it (managed membership), so a changed worker set never restarts the
//! gateway. Its prefill/decode mode speaks vLLM's NIXL protocol (`docs/smg-notes.md`)
//! but needs each worker's role in its registration, which the admin seam does not
//! carry yet: prefill/decode roles are refused for now.
//!
//! Readiness: its `/health` is 200 with no worker at all, so the gate reads `/readiness`
//! (`{"healthy_workers": N, ...}`; 503 until one is healthy) on every gateway until each
//! counts every worker, then every worker's own `/health`.

mod admin;

use super::{nginx, Frontend, FrontendParts, Layout};
use crate::catalog::Catalog;
use crate::launch::ConnectorChoice;
use crate::launch::{
    membership_address, Argv, BuildContext, Component, Count, Gate, LaunchProcess, Member,
    Membership, MembershipMode, Probe, ProcessKind,
};
use crate::recipe::diag::Problem;
use crate::recipe::{ArgValue, Recipe, RoleKind};
use std::collections::BTreeMap;

/// The Shepherd Model Gateway frontend.
pub(super) struct Smg;

/// Flags the gateway gets from the topology, with who sets them.
const MANAGED: &[(&str, &str)] = &[
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
    (
        "pd-disaggregation",
        "srt runs the gateway in its regular mode (prefill/decode roles: not yet)",
    ),
    (
        "prefill",
        "srt runs the gateway in its regular mode (prefill/decode roles: not yet)",
    ),
    (
        "decode",
        "srt runs the gateway in its regular mode (prefill/decode roles: not yet)",
    ),
    ("service-discovery", "srt lists the workers it starts"),
    ("enable-igw", "srt runs the gateway in its regular mode"),
];

/// Flags srt sets by default that a recipe may override.
const DEFAULTED: &[&str] = &[
    "worker-startup-timeout-secs",
    "worker-startup-check-interval",
];

/// The smg release srt ships a flag catalog for.
fn catalog() -> &'static Catalog {
    static PARSED: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    PARSED.get_or_init(|| {
        Catalog::parse(include_str!("catalog/smg-1.13.0.json")).expect("the shipped catalog parses")
    })
}

impl Frontend for Smg {
    fn name(&self) -> &'static str {
        "smg"
    }

    fn default_binary(&self) -> &'static str {
        "smg"
    }

    fn components(&self) -> &'static [&'static Component] {
        super::ROUTER_ONLY
    }

    fn install_hint(&self) -> &'static str {
        "install the pinned gateway with `scripts/install-smg.sh` and put `.tools/bin` \
         on PATH (`export PATH=\"$PWD/.tools/bin:$PATH\"`), or name the program with \
         `frontend.binary`"
    }

    fn catalog(&self) -> &'static Catalog {
        catalog()
    }

    fn admin(&self) -> Option<&'static dyn super::Admin> {
        Some(&admin::SmgAdmin)
    }

    fn managed_by(&self, flag: &str) -> Option<&'static str> {
        crate::catalog::managed_by(MANAGED, flag)
    }

    fn validate(&self, recipe: &Recipe, _: &[ConnectorChoice], problems: &mut Vec<Problem>) {
        // One problem for the recipe: its prefill and decode roles go together.
        if let Some(role) = recipe.roles.iter().find(|r| r.kind != RoleKind::Agg) {
            problems.push(
                Problem::new(
                    "srt::recipe::frontend_roles",
                    role.span,
                    format!(
                        "srt runs smg in its regular mode only for now, so it routes aggregated workers, not `{}`",
                        role.kind.name()
                    ),
                )
                .label("prefill/decode role")
                .help("use `frontend.type: vllm-router` for prefill/decode until srt registers smg's prefill/decode workers"),
            );
        }
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
        let advertised: Vec<(&LaunchProcess, &String)> = workers
            .iter()
            .filter_map(|w| Some((w, w.worker.as_ref()?.advertised_url.as_ref()?)))
            .collect();
        if advertised.is_empty() {
            return Err(Problem::new(
                "srt::recipe::no_workers",
                fe.span,
                "no worker serves HTTP for the gateway to route to",
            )
            .label("this frontend"));
        }
        check_policy(recipe)?;
        let user_flags = user_flags(recipe, ctx.health().timeout_secs);
        let mut processes = Vec::new();
        let mut gateway_urls = Vec::new();
        let mut upstreams = Vec::new();
        for (i, slot) in layout.routers.iter().enumerate() {
            let address = format!("router[{i}]");
            let (ports, port, metrics) = super::router_ports(ctx, fe, *slot, &address)?;
            let binary = fe
                .binary
                .clone()
                .unwrap_or_else(|| self.default_binary().to_string());
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
        let members: std::sync::Arc<[Member]> = advertised
            .iter()
            .map(|(w, url)| Member {
                worker: w.address.clone(),
                url: (*url).clone(),
            })
            .collect();
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
        let gates = gates(gateway_urls, gate_deps, &advertised);
        Ok(FrontendParts {
            memberships,
            processes,
            gates,
            public_url,
            warnings: Vec::new(),
        })
    }
}

/// `power_of_two` cannot serve workers kept current at run time: the gateway refuses
/// to start it with fewer than two workers, and srt starts it with none and adds them.
fn check_policy(recipe: &Recipe) -> Result<(), Problem> {
    match recipe.frontend.args.get("policy") {
        Some(arg) if arg.value == ArgValue::Str("power_of_two".into()) => Err(Problem::new(
            "srt::recipe::flag_value",
            arg.value_span,
            "smg's `power_of_two` policy refuses to start with fewer than two workers, while srt starts the gateway with none and adds each worker once it is healthy",
        )
        .label("not with workers added at run time")
        .help("use `round_robin`, `random`, `cache_aware`, `least_load`, `prefix_hash` or `consistent_hashing`")),
        _ => Ok(()),
    }
}

/// `frontend.args` with srt's defaults (the start-up budget from `health_check`, a
/// one-second check interval), sorted and rendered as the gateway reads them.
fn user_flags(recipe: &Recipe, timeout_secs: u64) -> Vec<String> {
    let mut flags: Vec<(String, ArgValue)> = recipe
        .frontend
        .args
        .0
        .iter()
        .map(|a| (a.key.clone(), a.value.clone()))
        .collect();
    for (key, default) in [
        (DEFAULTED[0], timeout_secs.to_string()),
        (DEFAULTED[1], "1".to_string()),
    ] {
        if !flags.iter().any(|(k, _)| k == key) {
            flags.push((key.to_string(), ArgValue::Str(default)));
        }
    }
    flags.sort_by(|a, b| a.0.cmp(&b.0));
    crate::catalog::render(Some(catalog()), &flags)
}

/// Every gateway counts every worker healthy on `/readiness`; then every worker answers
/// its own `/health`.
fn gates(
    gateway_urls: Vec<String>,
    gateways: Vec<String>,
    advertised: &[(&LaunchProcess, &String)],
) -> Vec<Gate> {
    let n = advertised.len() as u32;
    let mut deps = vec!["gate.router".to_string()];
    deps.extend(advertised.iter().map(|(w, _)| w.address.clone()));
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
                urls: advertised.iter().map(|(_, u)| (*u).clone()).collect(),
                path: "/health".into(),
            },
            depends_on: deps,
        },
    ]
}
