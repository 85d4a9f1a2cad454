//! `srt graph`.

use crate::{assemble_file, CmdResult, Done, RecipeArg};
use srt::graph::render::Format;

/// `--format` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// Graphviz dot (render with `dot -Tpng`).
    Dot,
    /// Mermaid flowchart (renders in Markdown viewers).
    Mermaid,
    /// Plain text: per node, each resource and what it depends on.
    Text,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Dot => Format::Dot,
            FormatArg::Mermaid => Format::Mermaid,
            FormatArg::Text => Format::Text,
        }
    }
}

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
    format: FormatArg,
}

/// Run `srt graph`.
pub(crate) fn run(args: Args) -> CmdResult {
    let (_, plan) = assemble_file(&args.recipe, args.nodes)?;
    let graph = srt::graph::lower(&plan, &serde_json::Value::Null)?;
    let names: Vec<String> = plan.nodes.iter().map(|n| n.name.clone()).collect();
    say_raw!(
        "{}",
        srt::graph::render::render(&graph, &names, args.format.into())
    );
    Ok(Done::Ok)
}
