//! A TensorRT-LLM worker's parallel sizes, as its LLM API reads them from the config
//! file (`tensor_parallel_size`, `pipeline_parallel_size`, `enable_attention_dp`), held
//! to the GPUs srt gives the endpoint: one MPI rank per GPU, `tp x pp` of them.

use crate::recipe::diag::Problem;
use crate::recipe::yaml::{Node, Value};
use crate::recipe::Role;
use crate::topology::Endpoint;

/// The sizes of one worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Sizes {
    /// Tensor parallel size (written, or derived from the GPUs).
    pub tp: u32,
    /// Pipeline parallel size.
    pub pp: u32,
    /// Whether the config wrote `tensor_parallel_size` (else srt writes it).
    pub tp_written: bool,
    /// Attention data parallelism: each TP rank serves its own requests.
    pub attention_dp: bool,
}

impl Sizes {
    /// MPI ranks: one per GPU.
    pub(super) fn ranks(self) -> u32 {
        self.tp * self.pp
    }

    /// Data-parallel ranks behind the worker's one registration.
    pub(super) fn data_parallel(self) -> u32 {
        if self.attention_dp {
            self.tp
        } else {
            1
        }
    }
}

/// The entry `key` of a config mapping.
pub(super) fn entry<'a>(config: Option<&'a Node>, key: &str) -> Option<&'a Node> {
    match &config?.value {
        Value::Map(entries) => entries.iter().find(|(k, _)| k.name == key).map(|(_, v)| v),
        _ => None,
    }
}

/// A positive integer entry (the catalog check refuses anything else).
fn size(config: Option<&Node>, key: &str) -> Option<u32> {
    match entry(config, key)?.value {
        Value::Int(i) if i > 0 => u32::try_from(i).ok(),
        _ => None,
    }
}

/// The sizes of `role`'s workers, before placement.
pub(super) fn sizes(role: &Role) -> (Option<u32>, u32, bool) {
    let config = role.config.as_ref();
    let tp = size(config, "tensor_parallel_size");
    let pp = size(config, "pipeline_parallel_size").unwrap_or(1);
    let adp = matches!(
        entry(config, "enable_attention_dp").map(|n| &n.value),
        Some(Value::Bool(true))
    );
    (tp, pp, adp)
}

/// The sizes of `role`'s worker on `endpoint`: `tp x pp` must be its GPUs.
pub(super) fn check(role: &Role, endpoint: &Endpoint) -> Result<Sizes, Problem> {
    let gpus = endpoint.total_gpus();
    let (tp, pp, attention_dp) = sizes(role);
    let path = format!("roles.{}.args", role.kind.name());
    let config = role.config.as_ref();
    let at = |key: &str| entry(config, key).map_or(role.span, |n| n.span);
    match tp {
        Some(tp) if tp * pp != gpus => Err(Problem::new(
            "srt::recipe::trtllm_parallel",
            at("tensor_parallel_size"),
            format!(
                "`{path}.tensor_parallel_size` x `pipeline_parallel_size` is {} ranks, but each {} worker has {gpus} GPUs",
                tp * pp,
                role.kind.name()
            ),
        )
        .label("one MPI rank per GPU")
        .misfit()
        .help("make tensor_parallel_size x pipeline_parallel_size the GPUs of a worker (`gpus`), or drop tensor_parallel_size and srt writes it")),
        Some(tp) => Ok(Sizes { tp, pp, tp_written: true, attention_dp }),
        None if !gpus.is_multiple_of(pp) => Err(Problem::new(
            "srt::recipe::trtllm_parallel",
            at("pipeline_parallel_size"),
            format!("`{path}.pipeline_parallel_size` {pp} does not divide a {} worker's {gpus} GPUs", role.kind.name()),
        )
        .label("one MPI rank per GPU")
        .misfit()),
        None => Ok(Sizes { tp: gpus / pp, pp, tp_written: false, attention_dp }),
    }
}
