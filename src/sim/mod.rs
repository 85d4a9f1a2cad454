//! A vLLM simulator: a stand-in for `vllm serve` for tests and demos on machines without
//! GPUs. This first part parses and validates `vllm serve` command lines and plans the
//! ports a vLLM process binds.

pub mod args;
pub mod config;
pub mod kv;
pub mod ports;

pub use config::SimConfig;

/// Why the simulator stopped before or while serving.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The command line does not parse (argparse's exit 2).
    #[error("{0}")]
    Usage(String),
    /// The command line parses but vLLM would refuse the combination.
    #[error("{0}")]
    Refused(String),
    /// A port could not be bound.
    #[error("{0}")]
    Bind(String),
    /// Anything else at run time.
    #[error("{0}")]
    Runtime(String),
}

impl SimError {
    /// The process exit code for this error: 2 for usage errors and refusals, else 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            SimError::Usage(_) | SimError::Refused(_) => 2,
            SimError::Bind(_) | SimError::Runtime(_) => 1,
        }
    }
}
