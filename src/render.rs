//! `srt render`.

use crate::{assemble_for, CmdResult, Done, RecipeArg};

/// Arguments of `srt render`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    recipe: RecipeArg,
    /// Nodes available (default: as many as the roles need).
    #[arg(long)]
    nodes: Option<usize>,
    /// Print the launch plan as versioned JSON (see docs/launch-plan-json.md).
    #[arg(long)]
    json: bool,
    /// Cluster profile; with `executor: slurm` the text output ends with the `sbatch`
    /// and `srun` commands (default: `srt-cluster.yaml` here if present).
    #[arg(long, env = "SRT_CLUSTER", value_name = "FILE")]
    cluster: Option<std::path::PathBuf>,
}

/// Run `srt render`.
pub(crate) fn run(args: Args) -> CmdResult {
    let profile = srt::workflow::cluster_profile(args.cluster.as_deref())?;
    let (recipe, plan) = assemble_for(&args.recipe, args.nodes, &profile)?;
    let profile = srt::workflow::effective_profile(profile, &recipe);
    if args.json {
        say_exact!("{}", srt::launch::render::json(&plan));
    } else {
        say_raw!("{}", srt::launch::render::render(&plan));
        if let Some(commands) = srt::exec::scheduler_commands(&plan, &profile) {
            say!();
            say_raw!("{}", commands);
        }
    }
    Ok(Done::Ok)
}
