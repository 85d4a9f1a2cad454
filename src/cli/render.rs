//! `srt render`.

use super::{load_recipe, report, RecipeArg};
use crate::exit;

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
pub fn run(args: Args) -> i32 {
    let (source, recipe) = match load_recipe(&args.recipe.file) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let profile = match crate::ops::cluster_profile(args.cluster.as_deref()) {
        Ok(p) => crate::ops::effective_profile(p, &recipe),
        Err(e) => {
            report(&e);
            return e.exit_code();
        }
    };
    let options = crate::launch::BuildOptions {
        nodes: args.nodes,
        ..Default::default()
    };
    match crate::launch::build(&recipe, &options) {
        Ok(plan) => {
            if args.json {
                println!("{}", crate::launch::render::json(&plan));
            } else {
                print!("{}", crate::launch::render::render(&plan));
                if profile.executor == crate::cluster::ExecutorKind::Slurm {
                    println!();
                    print!("{}", crate::exec::slurm::render(&plan, &profile));
                }
            }
            exit::OK
        }
        Err(problems) => {
            report(&source.error(problems));
            exit::INVALID_RECIPE
        }
    }
}
