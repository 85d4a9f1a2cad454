//! The command-line interface: clap definitions and one module per command.
//!
//! `src/main.rs` parses [`Cli`] and calls [`run`]; commands call into the library and
//! turn its results into output and an exit code ([`crate::exit`]).

/// `println!` that ignores a closed stdout: apply and destroy must finish their work
/// (and save state) even when their output pipe goes away.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// `print!` that ignores a closed stdout.
macro_rules! say_raw {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}

mod deploy;
mod graph;
mod inspect;
mod meta;
mod progress;
mod render;
mod validate;

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};

/// srt: plan and apply LLM-serving deployments (vLLM workers behind the vLLM Router).
#[derive(Debug, Parser)]
#[command(name = "srt", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Every command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a recipe and report every problem with its location.
    #[command(after_help = "Example:\n  srt validate -f examples/local-agg.yaml")]
    Validate(validate::Args),
    /// Print the launch plan: every process with node, devices, ports, env and command.
    #[command(
        after_help = "Examples:\n  srt render -f examples/seed/disagg-nixl.yaml\n  srt render -f examples/seed/agg-dep8.yaml --json"
    )]
    Render(render::Args),
    /// Show what apply would change, and why.
    #[command(
        after_help = "Examples:\n  srt plan -f examples/local-agg.yaml --simulate\n  srt plan -f examples/local-agg.yaml --simulate --detailed-exitcode -o plan.json"
    )]
    Plan(deploy::PlanArgs),
    /// Make the deployment match the recipe (or a saved plan).
    #[command(
        after_help = "Examples:\n  srt apply -f examples/local-agg.yaml --simulate\n  srt apply plan.json"
    )]
    Apply(deploy::ApplyArgs),
    /// Stop every process of a deployment and empty its state.
    #[command(
        after_help = "Examples:\n  srt destroy local-agg\n  srt destroy -f examples/local-agg.yaml --auto-approve"
    )]
    Destroy(deploy::DestroyArgs),
    /// Every resource of a deployment, probed now: node, ports, pid, state, age.
    #[command(after_help = "Examples:\n  srt status local-agg\n  srt status --json")]
    Status(inspect::StatusArgs),
    /// Deployments known on this machine, with their state.
    #[command(after_help = "Example:\n  srt list")]
    List(inspect::ListArgs),
    /// The captured stdout/stderr of a process.
    #[command(
        after_help = "Examples:\n  srt logs local-agg 'router[0]' --tail 50\n  srt logs local-agg 'worker.agg[0].node[0]' -f"
    )]
    Logs(inspect::LogsArgs),
    /// The resource graph a recipe lowers to, grouped by node.
    #[command(
        after_help = "Examples:\n  srt graph -f examples/seed/disagg-nixl.yaml\n  srt graph -f examples/seed/disagg-nixl.yaml --format dot | dot -Tpng > graph.png"
    )]
    Graph(graph::Args),
    /// Shell completions for bash, zsh, fish, elvish or PowerShell.
    #[command(after_help = "Example:\n  srt completions bash > /etc/bash_completion.d/srt")]
    Completions(meta::CompletionsArgs),
    /// The man page (roff), for `man -l`.
    #[command(after_help = "Example:\n  srt man > srt.1 && man -l srt.1")]
    Man,
    /// The JSON Schema of recipes, for editors (`# yaml-language-server: $schema=...`).
    #[command(after_help = "Example:\n  srt schema > recipe.schema.json")]
    Schema,
}

pub use meta::{man_page, schema_text};

/// Run a parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> i32 {
    // Read-only output piped into `head` ends quietly, as with other command-line tools.
    // Commands that change the world keep SIGPIPE ignored and write through `say!`, so a
    // closed pipe never kills them half-way through an apply.
    if !matches!(cli.command, Command::Apply(_) | Command::Destroy(_)) {
        // SAFETY: restoring the default disposition of SIGPIPE at start-up, before any
        // thread is spawned, has no memory-safety preconditions.
        unsafe {
            let _ = nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGPIPE,
                nix::sys::signal::SigHandler::SigDfl,
            );
        }
    }
    match cli.command {
        Command::Validate(a) => validate::run(a),
        Command::Render(a) => render::run(a),
        Command::Plan(a) => deploy::plan(a),
        Command::Apply(a) => deploy::apply(a),
        Command::Destroy(a) => deploy::destroy(a),
        Command::Status(a) => inspect::status(a),
        Command::List(a) => inspect::list(a),
        Command::Logs(a) => inspect::logs(a),
        Command::Graph(a) => graph::run(a),
        Command::Completions(a) => meta::completions(a),
        Command::Man => meta::man(),
        Command::Schema => meta::schema(),
    }
}

/// Print a diagnostic to stderr with source snippets.
pub(crate) fn report(diag: &dyn miette::Diagnostic) {
    let mut out = String::new();
    let handler = miette::GraphicalReportHandler::new_themed(
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            miette::GraphicalTheme::unicode()
        } else {
            miette::GraphicalTheme::unicode_nocolor()
        },
    );
    if handler.render_report(&mut out, diag).is_err() {
        out = diag.to_string();
    }
    eprintln!("{out}");
}

/// Read and load a recipe file, reporting problems; `Err` carries the exit code.
pub(crate) fn load_recipe(
    path: &Path,
) -> Result<(crate::recipe::Source, crate::recipe::Recipe), i32> {
    let (source, result) = crate::recipe::load_file(path);
    match result {
        Ok(r) => Ok((source, r)),
        Err(e) => {
            report(&e);
            Err(crate::exit::INVALID_RECIPE)
        }
    }
}

/// The `-f RECIPE` argument shared by commands.
#[derive(Debug, Clone, clap::Args)]
pub struct RecipeArg {
    /// Recipe file (YAML).
    #[arg(short = 'f', long = "file", value_name = "RECIPE")]
    pub file: PathBuf,
}
