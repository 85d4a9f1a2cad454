//! `srt slurm-agent`: the node agent a SLURM allocation runs, one task per node (see
//! `srt::exec::agent`). Not for people: srt starts it.

use crate::{CmdResult, Done, ExpectedError};
use std::path::PathBuf;

/// Arguments of `srt slurm-agent`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The deployment's agents' directory (`<state dir>/<deployment>/agents`).
    #[arg(long)]
    dir: PathBuf,
    /// The variable SLURM sets to the node's GPUs.
    #[arg(long, default_value = "CUDA_VISIBLE_DEVICES")]
    devices_env: String,
    /// The interface whose IPv4 address the node advertises.
    #[arg(long)]
    interface: Option<String>,
}

/// Run the agent of this node until the allocation ends.
pub(crate) fn run(args: Args) -> CmdResult {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let job = var("SLURM_JOB_ID")
        .and_then(|j| j.parse::<u64>().ok())
        .ok_or_else(|| {
            ExpectedError::Usage("srt slurm-agent runs as a task of a SLURM job step".into())
        })?;
    let node = var("SLURMD_NODENAME")
        .or_else(|| nix::unistd::gethostname().ok()?.into_string().ok())
        .ok_or_else(|| ExpectedError::Failed("cannot tell this node's name".into()))?;
    let options = srt::exec::agent::AgentOptions {
        agents: args.dir,
        job,
        node,
        interface: args.interface,
        devices_env: args.devices_env,
    };
    srt::exec::agent::run(&options)
        .map_err(|e| ExpectedError::Failed(format!("srt agent: {e}")))?;
    Ok(Done::Ok)
}
