//! `srt validate`.

use crate::{assemble_file, CmdResult, Done, RecipeArg};
use srt::term::plural;

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
pub(crate) fn run(args: Args) -> CmdResult {
    let (_, plan) = assemble_file(&args.recipe, args.nodes)?;
    say!(
        "{}: valid ({} on {})",
        args.recipe.file.display(),
        plural(plan.processes.len(), "process", "processes"),
        plural(plan.nodes.len(), "node", "nodes")
    );
    Ok(Done::Ok)
}
