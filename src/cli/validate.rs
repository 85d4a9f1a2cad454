//! `srt validate`.

use super::{load_recipe, report, RecipeArg};
use crate::exit;

/// Arguments of `srt validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    recipe: RecipeArg,
    /// Nodes available (default: as many as the roles need).
    #[arg(long)]
    nodes: Option<usize>,
}

/// Run `srt validate`.
pub fn run(args: Args) -> i32 {
    let (source, recipe) = match load_recipe(&args.recipe.file) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let options = crate::launch::BuildOptions {
        nodes: args.nodes,
        ..Default::default()
    };
    match crate::launch::build(&recipe, &options) {
        Ok(plan) => {
            println!(
                "{}: valid ({} processes on {} nodes)",
                args.recipe.file.display(),
                plan.processes.len(),
                plan.nodes.len()
            );
            exit::OK
        }
        Err(problems) => {
            report(&source.error(problems));
            exit::INVALID_RECIPE
        }
    }
}
