//! `srt`'s command line: clap definitions, one module per command, and what each
//! prints. The work itself is the `srt` library's.
//!
//! `src/main.rs` parses [`Cli`] and calls [`run`]; commands call into the library and
//! turn its results into output and an exit code ([`srt::exit`]).

/// `println!` that ignores a closed stdout: apply and destroy must finish their work
/// (and save state) even when their output pipe goes away. Control characters from
/// recipes, state or logs are escaped ([`srt::term::escape`]): human output never
/// drives the terminal (JSON output is unaffected: its encoder escapes them already).
macro_rules! say {
    () => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout());
    }};
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($t)*);
        let _ = writeln!(std::io::stdout(), "{}", ::srt::term::escape(&text));
    }};
}

/// `print!` that ignores a closed stdout, escaping control characters like [`say!`].
macro_rules! say_raw {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($t)*);
        let _ = write!(std::io::stdout(), "{}", ::srt::term::escape(&text));
    }};
}

/// `println!` that ignores a closed stdout and writes the text exactly: for JSON (its
/// encoder already escapes control characters; JSON output stays exact) and generated
/// documents (schema, man page, completions).
macro_rules! say_exact {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// `eprintln!` escaping control characters like [`say!`].
macro_rules! shout {
    () => {{
        eprintln!();
    }};
    ($($t:tt)*) => {{
        let text = format!($($t)*);
        eprintln!("{}", ::srt::term::escape(&text));
    }};
}

mod agent;
pub mod alloc;
mod bench;
mod deploy;
mod error;
mod graph;
mod inspect;
mod meta;
mod migrate;
mod progress;
mod render;
mod sweep;
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
    /// Re-spell an srtctl recipe (v1, or an override file) in the 2.0 layout srt reads.
    #[command(
        after_help = "Examples:\n  srt migrate old.yaml > new.yaml\n  srt migrate old.yaml --verify\n  srt migrate old.yaml --write"
    )]
    Migrate(migrate::Args),
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
    /// Run a deployed deployment's benchmark again (no apply): TTFT, TPOT, ITL, E2E
    /// latency and throughput per concurrency level, saved under its state directory.
    #[command(
        after_help = "Examples:\n  srt bench local-agg\n  srt bench local-agg --concurrencies 1x4x16 --request-rate 8"
    )]
    Bench(bench::Args),
    /// Run a recipe's `sweep:` points one after another in one deployment, each replacing
    /// only what its values change, then its benchmark; results per point, a summary
    /// table and a plot.
    #[command(
        after_help = "Examples:\n  srt sweep -f sweep.yaml --simulate --plan\n  srt sweep -f sweep.yaml --simulate --auto-approve --keep-going\n  srt sweep --results .srt/my-sweep/sweep"
    )]
    Sweep(sweep::Args),
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
    /// The node agent of a SLURM allocation (started by srt, one task per node).
    #[command(hide = true)]
    SlurmAgent(agent::Args),
}

pub use meta::{man_page, schema_text};

pub use error::{CmdResult, Done, ExpectedError};

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
    error::finish(match cli.command {
        Command::Validate(a) => validate::run(a),
        Command::Render(a) => render::run(a),
        Command::Migrate(a) => migrate::run(a),
        Command::Plan(a) => deploy::plan(a),
        Command::Apply(a) => deploy::apply(a),
        Command::Destroy(a) => deploy::destroy(a),
        Command::Status(a) => inspect::status(a),
        Command::List(a) => inspect::list(a),
        Command::Logs(a) => inspect::logs(a),
        Command::Bench(a) => bench::run(a),
        Command::Sweep(a) => sweep::sweep(a),
        Command::Graph(a) => graph::run(a),
        Command::Completions(a) => meta::completions(a),
        Command::Man => meta::man(),
        Command::Schema => meta::schema(),
        Command::SlurmAgent(a) => agent::run(a),
    })
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

/// Show the launch plan's warnings (located in the recipe, like errors) on stderr.
pub(crate) fn report_warnings(
    source: &srt::recipe::Source,
    warnings: &[srt::recipe::diag::Problem],
) {
    if !warnings.is_empty() {
        report(&source.error(warnings.to_vec()));
    }
}

/// Read and load a recipe file.
pub(crate) fn load_recipe(
    path: &Path,
    selection: &srt::recipe::Selection,
) -> Result<(srt::recipe::Source, srt::recipe::Recipe), error::ExpectedError> {
    let (source, result) = srt::recipe::load_file_selected(path, selection);
    Ok((source, result?))
}

/// Load a recipe and build its launch plan (`nodes` available).
pub(crate) fn assemble_file(
    recipe: &RecipeArg,
    nodes: Option<usize>,
) -> Result<(srt::recipe::Recipe, srt::launch::LaunchPlan), error::ExpectedError> {
    assemble_for(recipe, nodes, &srt::cluster::ClusterProfile::Local)
}

/// [`assemble_file`] with the aliases of `profile` resolved in the recipe.
pub(crate) fn assemble_for(
    recipe: &RecipeArg,
    nodes: Option<usize>,
    profile: &srt::cluster::ClusterProfile,
) -> Result<(srt::recipe::Recipe, srt::launch::LaunchPlan), error::ExpectedError> {
    let (source, unread) = srt::recipe::load::read_source(&recipe.file);
    if let Some(err) = unread {
        return Err(err.into());
    }
    let options = srt::assemble::BuildOptions {
        nodes,
        ..Default::default()
    };
    let stem = srt::recipe::load::default_name(&recipe.file);
    let recipe = srt::assemble::load_fitting(&source, &stem, &recipe.selection(), &options, |r| {
        profile.resolve_aliases(r);
    })?;
    let plan = srt::assemble::assemble(&recipe, &options).map_err(|p| source.error(p))?;
    report_warnings(&source, &plan.warnings);
    Ok((recipe, plan))
}

/// clap value parser for a deployment NAME argument: the recipe's name rules, so a
/// name can never reach outside the state directory (`../x`, ``, `/etc`).
pub(crate) fn deployment_name(value: &str) -> Result<String, String> {
    if srt::recipe::load::valid_name(value) {
        Ok(value.to_string())
    } else {
        Err(format!(
            "`{}` is not a deployment name (letters, digits, `-`, `_` and `.`, starting with a letter or digit, at most 128 characters)",
            srt::term::escape_line(value)
        ))
    }
}

/// The `-f RECIPE` argument shared by commands.
#[derive(Debug, Clone, clap::Args)]
pub struct RecipeArg {
    /// Recipe file (YAML).
    #[arg(short = 'f', long = "file", value_name = "RECIPE")]
    pub file: PathBuf,
    /// The recipe of an srtctl override file: `override_<name>`,
    /// `zip_override_<group>[i]` or `base` (default: its first variant).
    #[arg(long, value_name = "LABEL")]
    pub variant: Option<String>,
}

impl RecipeArg {
    /// The recipe of the file to load.
    pub fn selection(&self) -> srt::recipe::Selection {
        srt::recipe::Selection {
            variant: self.variant.clone(),
        }
    }
}
