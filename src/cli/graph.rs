//! `srt graph`.

use super::{load_recipe, report, RecipeArg};
use crate::exit;
use crate::graph::render::Format;

/// Arguments of `srt graph`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    recipe: RecipeArg,
    /// Nodes available (default: as many as the roles need).
    #[arg(long)]
    nodes: Option<usize>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// Run `srt graph`.
pub fn run(args: Args) -> i32 {
    let (source, recipe) = match load_recipe(&args.recipe.file) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let options = crate::launch::BuildOptions {
        nodes: args.nodes,
        ..Default::default()
    };
    let plan = match crate::launch::build(&recipe, &options) {
        Ok(p) => p,
        Err(problems) => {
            report(&source.error(problems));
            return exit::INVALID_RECIPE;
        }
    };
    let graph = match crate::graph::lower(&plan, &serde_json::Value::Null) {
        Ok(g) => g,
        Err(e) => {
            report(&e);
            return exit::ERROR;
        }
    };
    let names: Vec<String> = plan.nodes.iter().map(|n| n.name.clone()).collect();
    print!(
        "{}",
        crate::graph::render::render(&graph, &names, args.format)
    );
    exit::OK
}
