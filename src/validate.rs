//! `srt validate`.

use crate::{assemble_for, CmdResult, Done, RecipeArg};
use srt::term::plural;

/// Arguments of `srt validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    recipe: RecipeArg,
    /// Nodes available (default: as many as the roles need).
    #[arg(long)]
    nodes: Option<usize>,
    /// Cluster profile whose aliases and script directories the recipe is read with
    /// (default: `srt-cluster.yaml` here if present, else srtctl's `srtslurm.yaml`
    /// where srtctl finds it).
    #[arg(long, env = "SRT_CLUSTER", value_name = "FILE")]
    cluster: Option<std::path::PathBuf>,
}

/// Run `srt validate`.
pub(crate) fn run(args: Args) -> CmdResult {
    let profile = srt::workflow::cluster_profile(args.cluster.as_deref())?;
    let (_, plan) = assemble_for(&args.recipe, args.nodes, &profile)?;
    say!(
        "{}: valid ({} on {})",
        args.recipe.file.display(),
        plural(plan.processes.len(), "process", "processes"),
        plural(plan.nodes.len(), "node", "nodes")
    );
    Ok(Done::Ok)
}
