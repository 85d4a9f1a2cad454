//! The parallel sizes of an SGLang worker and the rules SGLang 0.5.23 holds them to
//! (`docs/sglang-notes.md`, "What resolution refuses"): one server process per node, a
//! worker's GPUs are `tp-size x pp-size x dp-size` (data-parallel replicas), attention
//! data parallelism (`attn-dp-size`, or srtctl's `dp-size` with `enable-dp-attention`,
//! which SGLang rewrites to it) splits the tensor-parallel group and takes no GPU of
//! its own. A worker of one node may be given more GPUs than its sizes use; more than
//! it is given, or fewer over several nodes, is refused.

use crate::catalog::{Catalog, Resolution};
use crate::recipe::diag::Problem;
use crate::recipe::{Arg, ArgValue, Role};
use crate::topology::Endpoint;

/// A worker's parallel sizes, after SGLang's rewrite of `enable-dp-attention`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Sizes {
    /// Tensor parallel size.
    pub tp: u32,
    /// Pipeline parallel size.
    pub pp: u32,
    /// Data-parallel replicas.
    pub dp: u32,
    /// Attention data-parallel groups inside the tensor-parallel group.
    pub attn_dp: u32,
}

impl Sizes {
    /// The GPUs one worker uses.
    pub(super) fn gpus(self) -> u32 {
        self.tp * self.pp * self.dp
    }

    /// The DP ranks behind the worker's API (replicas or attention groups).
    pub(super) fn ranks(self) -> u32 {
        self.dp.max(self.attn_dp)
    }
}

/// The arg of `role` that SGLang reads as the option named `flag` (any of that
/// option's strings: `tp-size` finds `tensor-parallel-size` too). By name, not by
/// `dest`: releases name the same option's destination differently (0.5.8's
/// `tensor_parallel_size` is 0.5.23's `tp_size`).
pub(super) fn arg<'r>(catalog: &Catalog, role: &'r Role, flag: &str) -> Option<&'r Arg> {
    let Resolution::Exact(wanted, _) = catalog.resolve(flag) else {
        return None;
    };
    role.args.0.iter().find(|a| match catalog.resolve(&a.key) {
        Resolution::Exact(o, _) => o.dest == wanted.dest,
        _ => false,
    })
}

/// The positive integer option `flag`, 1 when not written.
fn size(catalog: &Catalog, role: &Role, flag: &str) -> Result<u32, Problem> {
    let Some(arg) = arg(catalog, role, flag) else {
        return Ok(1);
    };
    match &arg.value {
        ArgValue::Int(v) if *v >= 1 && *v <= 1 << 20 => Ok(*v as u32),
        _ => Err(Problem::new(
            "srt::recipe::parallel_size",
            arg.value_span,
            format!(
                "`roles.{}.args.{}` must be a positive integer",
                role.kind.name(),
                arg.key
            ),
        )
        .label("expected a positive integer")),
    }
}

/// The role's sizes as SGLang resolves them.
pub(super) fn sizes(catalog: &Catalog, role: &Role) -> Result<Sizes, Problem> {
    let mut s = Sizes {
        tp: size(catalog, role, "tp-size")?,
        pp: size(catalog, role, "pp-size")?,
        dp: size(catalog, role, "dp-size")?,
        attn_dp: size(catalog, role, "attn-dp-size")?,
    };
    let dp_attention =
        arg(catalog, role, "enable-dp-attention").is_some_and(|a| a.value == ArgValue::Bool(true));
    if dp_attention && s.attn_dp == 1 {
        (s.attn_dp, s.dp) = (s.dp, 1);
    }
    Ok(s)
}

/// Where a problem about the sizes points: the first size written, else `gpus`.
fn span_of_sizes(catalog: &Catalog, role: &Role) -> miette::SourceSpan {
    ["dp-size", "tp-size", "pp-size", "attn-dp-size"]
        .iter()
        .find_map(|d| arg(catalog, role, d).map(|a| a.key_span))
        .or(role.gpus.as_ref().map(|g| g.span))
        .unwrap_or(role.span)
}

/// The sizes of `role`, checked against the GPUs and nodes of `endpoint`.
pub(super) fn check(catalog: &Catalog, role: &Role, endpoint: &Endpoint) -> Result<Sizes, Problem> {
    let s = sizes(catalog, role)?;
    let total = endpoint.total_gpus();
    let nodes = endpoint.nodes.len() as u32;
    let name = role.kind.name();
    let refuse = |msg: String, label: &str| {
        Problem::new(
            "srt::recipe::parallel_size",
            span_of_sizes(catalog, role),
            msg,
        )
        .label(label.to_string())
        .misfit()
    };
    // Fewer on one node is SGLang's to run: it opens the first of its visible devices
    // (`idle_gpus` says the others stay idle).
    if s.gpus() > total || (s.gpus() < total && nodes > 1) {
        return Err(refuse(
            format!(
                "tp-size {} x pp-size {} x dp-size {} = {} GPUs, but each `{name}` worker has {total}",
                s.tp, s.pp, s.dp, s.gpus()
            ),
            "parallel sizes do not use the worker's GPUs",
        )
        .help(format!(
            "set `gpus: {}` on the role, or make tp-size x pp-size x dp-size cover {total} GPUs (attention DP, `attn-dp-size`, splits the TP group and takes no GPU of its own)",
            s.gpus()
        )));
    }
    if s.dp > 1 && nodes > 1 {
        return Err(refuse(
            format!("SGLang 0.5.23 runs no data-parallel replicas across nodes, and each `{name}` worker spans {nodes}"),
            "DP replicas spanning nodes",
        )
        .help("use attention DP across the nodes (`attn-dp-size`), or one replica per worker (`workers: N`)"));
    }
    if !(s.tp * s.pp).is_multiple_of(nodes) {
        return Err(refuse(
            format!("tp-size x pp-size = {} does not divide over the {nodes} nodes of a `{name}` worker", s.tp * s.pp),
            "uneven ranks per node",
        ));
    }
    if !s.tp.is_multiple_of(s.attn_dp) {
        return Err(refuse(
            format!(
                "attention DP of {} does not divide tp-size {}",
                s.attn_dp, s.tp
            ),
            "attention DP must divide the TP group",
        ));
    }
    if s.attn_dp > 1 && s.dp > 1 {
        return Err(refuse(
            "SGLang 0.5.23 refuses data-parallel replicas combined with attention data parallelism"
                .to_string(),
            "replicas and attention DP together",
        ));
    }
    Ok(s)
}
