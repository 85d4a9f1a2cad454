//! `srt plan`, `srt apply`, `srt destroy`.

use crate::error::Unconfirmed;
use crate::progress::{self, Mode};
use crate::{CmdResult, Done, ExpectedError};
use srt::apply::{self, Apply, Cancel};
use srt::exec::Executor;
use srt::exit;
use srt::launch::{Bindings, RUN_DIR};
use srt::plan::file::PlanFile;
use srt::plan::{self, PlanOptions};
use srt::recipe::Source;
use srt::workflow::{self, OpError, PrepareOptions, Prepared};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

/// Options shared by plan, apply and destroy.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Common {
    /// Directory holding deployment state (`<dir>/<name>/state.json`).
    #[arg(long, env = "SRT_STATE_DIR", default_value = ".srt", global = true)]
    pub state_dir: PathBuf,
    /// Run workers as the vLLM simulator (no GPUs needed); golden files still show `vllm serve`.
    #[arg(long, env = "SRT_SIMULATE", global = true)]
    pub simulate: bool,
    /// Nodes available (default: as many as the roles need).
    #[arg(long, global = true)]
    pub nodes: Option<usize>,
    /// Wait this many seconds for the deployment lock instead of failing at once.
    #[arg(long, default_value_t = 0, global = true)]
    pub lock_timeout: u64,
    /// Cluster profile selecting the executor (default: `srt-cluster.yaml` in the
    /// current directory if present, else local). See docs/slurm.md.
    #[arg(long, env = "SRT_CLUSTER", value_name = "FILE", global = true)]
    pub cluster: Option<PathBuf>,
    /// The recipe of an srtctl override file: `override_<name>`,
    /// `zip_override_<group>[i]` or `base` (default: its first variant).
    #[arg(long, value_name = "LABEL", global = true)]
    pub variant: Option<String>,
}

impl Common {
    pub(crate) fn selection(&self) -> srt::recipe::Selection {
        srt::recipe::Selection {
            variant: self.variant.clone(),
        }
    }
    pub(crate) fn prepare_options(&self) -> PrepareOptions {
        PrepareOptions {
            state_dir: self.state_dir.clone(),
            nodes: self.nodes,
            simulate: self.simulate,
            grace: Duration::from_secs(10),
            cluster: self.cluster.clone(),
            selection: self.selection(),
        }
    }
    pub(crate) fn lock_wait(&self) -> Option<Duration> {
        (self.lock_timeout > 0).then(|| Duration::from_secs(self.lock_timeout))
    }
}

/// How `plan` and `apply` plan.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Planning {
    /// Replace this resource even if unchanged (repeatable).
    #[arg(long, value_name = "ADDRESS")]
    replace: Vec<String>,
    /// Probe the live deployment before planning; `--refresh=false` plans against the
    /// recorded state alone: faster at scale, but a process that died or a Router that
    /// lost a worker does not show.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    refresh: bool,
}

impl Planning {
    fn options(&self) -> PlanOptions {
        PlanOptions {
            replace: self.replace.iter().cloned().collect(),
            destroy: false,
            skip_refresh: !self.refresh,
        }
    }
}

/// Arguments of `srt plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Recipe file.
    #[arg(short = 'f', long = "file", value_name = "RECIPE")]
    file: PathBuf,
    #[command(flatten)]
    common: Common,
    /// Print the plan as versioned JSON.
    #[arg(long)]
    json: bool,
    /// Exit 0 when there are no changes, 2 when there are, 1 on error.
    #[arg(long)]
    detailed_exitcode: bool,
    /// Save the plan for `srt apply FILE`.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    planning: Planning,
    /// After the plan, show for every replaced resource which hash inputs changed.
    #[arg(long)]
    explain: bool,
}

/// Arguments of `srt apply`.
#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    /// A plan saved with `srt plan -o FILE` (instead of `-f RECIPE`; it already fixes
    /// what is replaced and whether the deployment was refreshed).
    #[arg(value_name = "PLAN_FILE", conflicts_with_all = ["file", "replace", "refresh"])]
    plan_file: Option<PathBuf>,
    /// Recipe file.
    #[arg(
        short = 'f',
        long = "file",
        value_name = "RECIPE",
        required_unless_present = "plan_file"
    )]
    file: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
    /// Do not ask for confirmation.
    #[arg(long)]
    auto_approve: bool,
    /// Resources worked on at once.
    #[arg(long, default_value_t = 10)]
    parallelism: usize,
    #[command(flatten)]
    planning: Planning,
    /// Print only errors and the final summary.
    #[arg(long, short)]
    quiet: bool,
    /// Print the plan and progress as JSON events, one per line (needs --auto-approve when
    /// there are changes).
    #[arg(long)]
    json: bool,
}

/// Arguments of `srt destroy`.
#[derive(Debug, clap::Args)]
pub struct DestroyArgs {
    /// Deployment name (or use `-f RECIPE`).
    #[arg(value_name = "NAME", required_unless_present = "file", value_parser = crate::deployment_name)]
    name: Option<String>,
    /// Recipe file whose deployment to destroy.
    #[arg(short = 'f', long = "file", value_name = "RECIPE")]
    file: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
    /// Do not ask for confirmation.
    #[arg(long)]
    auto_approve: bool,
    /// Print only errors and the final summary.
    #[arg(long, short)]
    quiet: bool,
}

/// Run `srt plan`.
pub(crate) fn plan(args: PlanArgs) -> CmdResult {
    let setup = workflow::setup_file(&args.file, &args.common.prepare_options())?;
    let options = args.planning.options();
    // The state is read and refreshed while the graph is built: neither needs the other.
    let (p, read) = setup.plan_live(
        |s| {
            let lock = s.store.lock("plan", args.common.lock_wait())?;
            let state = workflow::load_or_create(&s.store, &s.recipe.name.value, &lock)?;
            drop(lock);
            workflow::restore(&*s.exec, &state)?;
            Ok(((), state))
        },
        &options,
    )?;
    crate::report_warnings(&p.source, &p.launch.warnings);
    let ((), state, mut plan) = read?;
    plan.identity = p
        .launch
        .identity
        .as_ref()
        .map(|i| serde_json::to_value(i).expect("identity is JSON"));
    if args.json {
        say_exact!("{}", plan::render::json(&plan));
    } else {
        show(&plan, &*p.exec);
        if args.explain {
            say!("\nWhy each resource is replaced:");
            say_raw!("{}", plan::render::explain(&plan, &state, &p.graph));
        }
    }
    for missing in workflow::missing_programs(&p, &plan) {
        shout!("warning: not on PATH, so apply would refuse to start: {missing}");
    }
    // What this machine lacks is said here, not in the launch plan, which is the same
    // on every machine.
    if let Some(missing) = workflow::missing_tokenizer(&p, &plan) {
        shout!(
            "warning: the benchmark has no tokenizer here, so apply would refuse to start: {}",
            missing.0
        );
    }
    if let Some(unusable) = workflow::unusable_chat_template(&p, &plan) {
        shout!(
            "warning: the benchmark's chat template is unusable here, so apply would refuse to start: {}",
            unusable.0.with_help()
        );
    }
    if let Some(out) = &args.out {
        let file = PlanFile {
            file_format_version: plan::file::FILE_FORMAT_VERSION,
            recipe_name: p.source.name.clone(),
            recipe_text: p.source.text.clone(),
            nodes: p.nodes,
            simulate: p.simulate,
            plan: plan.clone(),
        };
        file.save(out)
            .map_err(|e| OpError::Other(format!("cannot write {}: {e}", out.display())))?;
        if !args.json {
            say!(
                "\nSaved the plan to {}. Apply exactly it with: srt apply {}",
                out.display(),
                out.display()
            );
        }
    }
    let done = if args.detailed_exitcode && plan.has_changes() {
        Done::Changes
    } else {
        Done::Ok
    };
    // The process exits next, and its memory goes back to the system at once: freeing
    // the launch plan, graph, state and plan one allocation at a time would add a
    // seventh to the time of a 50,000-resource plan. Nothing of them needs dropping (no
    // lock or file is held by them).
    std::mem::forget((p.launch, p.simulated, p.graph, state, plan));
    Ok(done)
}

/// Ask `Do you want to {question}?` on a terminal (only `yes` goes on), unless
/// `auto_approve`; without a terminal, refuse.
pub(crate) fn confirm(question: &'static str, auto_approve: bool) -> Result<(), ExpectedError> {
    if auto_approve {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(ExpectedError::NotConfirmed {
            why: Unconfirmed::NoTerminal,
            question,
        });
    }
    say_raw!("\nDo you want to {question}? Only 'yes' will be accepted: ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    if line.trim() == "yes" {
        Ok(())
    } else {
        Err(ExpectedError::NotConfirmed {
            why: Unconfirmed::Declined,
            question,
        })
    }
}

/// Install SIGINT/SIGTERM handling: the first signal cancels (start nothing new, stop
/// waiting in gates); the second saves state and exits with 130.
pub(crate) fn install_signals(rt: &tokio::runtime::Runtime, cancel: Cancel, state: apply::Shared) {
    rt.spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
            return;
        };
        let mut count = 0;
        loop {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            count += 1;
            if count == 1 {
                shout!("\nInterrupt received: starting nothing new, waiting for steps in flight, then saving state. Signal again to exit at once.");
                cancel.trigger();
            } else {
                // Taking the state mutex waits for a launch batch being recorded; every
                // launched process is on disk with its identity (at most the latest
                // port-check and gate results are not: they are re-checked by the next
                // apply), and the lock is an flock the kernel releases on exit.
                let _guard = state.lock();
                shout!("Second interrupt: state is saved; exiting.");
                std::process::exit(exit::INTERRUPTED);
            }
        }
    });
}

/// Apply starts nothing when a program it would start is missing here: a deployment
/// half started (its Router failing to exec after the workers came up) helps nobody.
pub(crate) fn refuse_missing_programs(p: &Prepared, plan: &plan::Plan) -> Result<(), OpError> {
    let missing = workflow::missing_programs(p, plan);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(OpError::MissingPrograms(workflow::MissingPrograms(missing)))
    }
}

/// Apply starts nothing when the benchmark it would run cannot count tokens, or cannot
/// wrap its prompts in the chat template it asks for: a benchmark failing once every
/// worker is up helps nobody.
pub(crate) fn refuse_missing_tokenizer(p: &Prepared, plan: &plan::Plan) -> Result<(), OpError> {
    if let Some(missing) = workflow::missing_tokenizer(p, plan) {
        return Err(OpError::MissingTokenizer(missing));
    }
    match workflow::unusable_chat_template(p, plan) {
        None => Ok(()),
        Some(unusable) => Err(OpError::ChatTemplate(unusable)),
    }
}

/// Refuse a plan whose launches would find their ports taken by another program: checked
/// for every port block the plan creates, before anything starts.
pub(crate) fn refuse_taken_ports(
    p: &Prepared,
    plan: &plan::Plan,
    state: &srt::state::State,
) -> Result<(), OpError> {
    let taken = workflow::taken_ports(p, plan, state);
    if taken.is_empty() {
        Ok(())
    } else {
        Err(OpError::PortsTaken(workflow::PortsTaken(taken)))
    }
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Run `srt apply`.
pub(crate) fn apply(args: ApplyArgs) -> CmdResult {
    let saved = match &args.plan_file {
        Some(path) => Some(PlanFile::load(path)?),
        None => None,
    };
    let mut options = args.common.prepare_options();
    let setup = match (&saved, &args.file) {
        (Some(f), _) => {
            options.nodes = f.nodes;
            options.simulate = f.simulate;
            let stem = srt::recipe::load::default_name(std::path::Path::new(&f.recipe_name));
            workflow::setup(
                Source {
                    name: f.recipe_name.clone(),
                    text: f.recipe_text.clone(),
                },
                &stem,
                &options,
            )
        }
        (None, Some(file)) => workflow::setup_file(file, &options),
        (None, None) => unreachable!("clap requires one"),
    }?;
    // The state is read (and, for a new plan, refreshed) while the graph is built.
    let read = |s: &workflow::Setup| -> Result<_, workflow::OpError> {
        let lock = s.store.lock("apply", args.common.lock_wait())?;
        let state = workflow::load_or_create(&s.store, &s.recipe.name.value, &lock)?;
        workflow::restore(&*s.exec, &state)?;
        Ok((lock, state))
    };
    let (p, read) = match &saved {
        Some(_) => {
            let (p, read) = setup.lower_while(read)?;
            (p, read.map(|(lock, state)| (lock, state, None)))
        }
        None => {
            let (p, read) = setup.plan_live(read, &args.planning.options())?;
            (p, read.map(|(lock, state, plan)| (lock, state, Some(plan))))
        }
    };
    crate::report_warnings(&p.source, &p.launch.warnings);
    let (lock, mut state, fresh) = read?;
    if let Some(prev) = lock.previous_holder_died() {
        shout!(
            "note: taking over the lock left by pid {} ({}@{}, `{}`), which is no longer running",
            prev.pid,
            prev.user,
            prev.host,
            prev.operation
        );
    }
    let plan = match (&saved, fresh) {
        (Some(f), _) => {
            f.check_fresh(&state.lineage, state.serial, &p.recipe_hash)?;
            // What launches left since the plan was saved is found again now.
            let mut plan = f.plan.clone();
            for o in workflow::recover(&mut state, &*p.exec) {
                if !plan.orphans.iter().any(|k| k.runtime == o.runtime) {
                    plan.orphans.push(o);
                }
            }
            refuse_missing_programs(&p, &plan)?;
            refuse_missing_tokenizer(&p, &plan)?;
            refuse_taken_ports(&p, &plan, &state)?;
            plan
        }
        (None, fresh) => {
            let plan = fresh.expect("planned when no plan file was given");
            if args.json {
                progress::plan_events(&plan);
            } else if args.quiet {
                say_raw!("{}", plan::render::summary_line(&plan));
            } else {
                show(&plan, &*p.exec);
            }
            refuse_missing_programs(&p, &plan)?;
            refuse_missing_tokenizer(&p, &plan)?;
            refuse_taken_ports(&p, &plan, &state)?;
            if plan.has_changes() {
                if args.json && !args.auto_approve {
                    return Err(ExpectedError::NotConfirmed {
                        why: Unconfirmed::Json,
                        question: "perform these actions",
                    });
                }
                confirm("perform these actions", args.auto_approve)?;
            }
            plan
        }
    };
    let rt = runtime();
    let cancel = Cancel::default();
    let shared = apply::shared(state);
    install_signals(&rt, cancel.clone(), shared.clone());
    let mode = Mode::choose(args.quiet, args.json);
    let events = progress::printer(mode);
    let run = Apply {
        launch: p.runnable(),
        graph: &p.graph,
        plan: &plan,
        exec: &*p.exec,
        store: &p.store,
        lock: &lock,
        parallelism: args.parallelism,
        at_once: false,
        health: p.recipe.health_check.clone(),
        cancel,
        events: &events,
    };
    let bench_before = srt::bench::result::latest(p.store.dir());
    let outcome = rt.block_on(run.run(&shared));
    {
        let mut s = shared.lock().expect("state mutex");
        if outcome.failed.is_empty() && !outcome.interrupted {
            s.recipe_hash = Some(p.recipe_hash.clone());
            s.identity = p
                .launch
                .identity
                .as_ref()
                .map(|i| serde_json::to_value(i).expect("identity is JSON"));
        }
        p.store.save(&lock, &mut s)?;
    }
    drop(lock);
    let code = summarize(&p, &outcome, mode);
    bench_table(&p, bench_before, mode);
    code
}

/// The table of the benchmark this apply ran, if it ran one.
fn bench_table(p: &Prepared, before: Option<PathBuf>, mode: Mode) {
    let Some(run) =
        srt::bench::result::latest(p.store.dir()).filter(|r| Some(r) != before.as_ref())
    else {
        return;
    };
    if matches!(mode, Mode::Json | Mode::Quiet) {
        return;
    }
    if let Ok(levels) = srt::bench::result::load(&run) {
        say!("\nBenchmark ({}):", run.display());
        say_raw!("{}", srt::bench::result::table(&levels));
        let plot = run.with_extension("svg");
        if plot.is_file() {
            say!("Plot: {}", plot.display());
        }
    }
}

fn summarize(p: &Prepared, o: &apply::Outcome, mode: Mode) -> CmdResult {
    let url = p.exec.bindings().resolve(&p.launch.public_url);
    if mode == Mode::Json {
        progress::outcome_event(o, &url);
    }
    let applied = (o.created, o.replaced, o.destroyed);
    if o.interrupted {
        return Err(ExpectedError::Interrupted { applied });
    }
    if o.no_space {
        return Err(ExpectedError::NoSpace {
            failures: o.failed.clone(),
            command: "apply",
        });
    }
    if !o.failed.is_empty() {
        return Err(ExpectedError::ApplyFailed {
            failures: o.failed.clone(),
            skipped: o.skipped.len(),
            applied,
        });
    }
    if mode == Mode::Json {
        return Ok(Done::Ok);
    }
    if o.created + o.replaced + o.updated + o.destroyed + o.untracked == 0 {
        say!(
            "\nApply complete: nothing to change; {} check(s) passed.",
            o.checked
        );
    } else {
        let updated = match o.updated {
            0 => String::new(),
            n => format!("{n} updated in-place, "),
        };
        let checked = match o.checked {
            0 => String::new(),
            n => format!(", {n} checked"),
        };
        say!(
            "\nApply complete: {} created, {updated}{} replaced, {} destroyed{checked}{}.",
            o.created,
            o.replaced,
            o.destroyed,
            untracked(o.untracked)
        );
    }
    say!("Public URL: {url}");
    say!(
        "Try: curl -s -w '\\n' {url}/v1/completions -H 'content-type: application/json' -d '{{\"model\": \"{}\", \"prompt\": \"Hello\", \"max_tokens\": 16}}'",
        p.launch.served_model_name
    );
    Ok(Done::Ok)
}

/// The summary's note on untracked processes stopped, if any.
fn untracked(n: usize) -> String {
    match n {
        0 => String::new(),
        1 => ", 1 untracked process stopped".into(),
        n => format!(", {n} untracked processes stopped"),
    }
}

/// Run `srt destroy`.
pub(crate) fn destroy(args: DestroyArgs) -> CmdResult {
    let name = match (&args.name, &args.file) {
        (Some(n), _) => n.clone(),
        (None, Some(f)) => {
            crate::load_recipe(f, &args.common.selection())?
                .1
                .name
                .value
        }
        (None, None) => unreachable!("clap requires one"),
    };
    let dir = workflow::deployment_dir(&args.common.state_dir, &name);
    let store = srt::state::StateStore::new(&dir);
    let lock = store.lock("destroy", args.common.lock_wait())?;
    let mut state = match store.load()? {
        Some(s) => s,
        // No state, but leases: processes srt started whose state was lost.
        None if !srt::exec::local::lease_files(&dir).is_empty() => {
            srt::state::State::new(name.clone())
        }
        None => {
            say!(
                "No state for deployment `{name}` under {}: nothing to destroy.",
                args.common.state_dir.display()
            );
            return Ok(Done::Ok);
        }
    };
    let profile = workflow::cluster_profile(args.common.cluster.as_deref())?;
    let exec = workflow::executor_for_state(profile, &name, &dir, &state);
    workflow::restore(&*exec, &state)?;
    let (launch, graph) = workflow::empty(&name);
    let orphans = workflow::recover(&mut state, &*exec);
    let observed = workflow::refresh(&state, &*exec, None);
    let mut plan = plan::diff(
        &graph,
        &state,
        &observed,
        "",
        &PlanOptions {
            destroy: true,
            ..Default::default()
        },
    );
    plan.orphans = orphans;
    if args.quiet {
        say_raw!("{}", plan::render::summary_line(&plan));
    } else {
        show(&plan, &*exec);
    }
    if !plan.has_changes() {
        return Ok(Done::Ok);
    }
    confirm(
        "destroy every resource of this deployment",
        args.auto_approve,
    )?;
    let rt = runtime();
    let events = progress::printer(Mode::choose(args.quiet, false));
    let shared = apply::shared(state);
    let run = Apply {
        launch: &launch,
        graph: &graph,
        plan: &plan,
        exec: &*exec,
        store: &store,
        lock: &lock,
        parallelism: 10,
        at_once: false,
        health: srt::recipe::HealthCheck {
            timeout_secs: 1,
            interval_secs: 1,
            unhealthy_grace_secs: 1,
        },
        cancel: Cancel::default(),
        events: &events,
    };
    let outcome = rt.block_on(run.run(&shared));
    if outcome.no_space {
        return Err(ExpectedError::NoSpace {
            failures: outcome.failed,
            command: "destroy",
        });
    }
    if !outcome.failed.is_empty() {
        return Err(ExpectedError::DestroyIncomplete {
            failures: outcome.failed,
        });
    }
    workflow::clean_leases(&dir);
    {
        // A sweep run again on what replaces this deployment starts from its first point.
        let mut s = shared.lock().expect("state mutex");
        if s.sweep.take().is_some() {
            store.save(&lock, &mut s)?;
        }
    }
    say!(
        "\nDestroy complete: {} destroyed{}.",
        outcome.destroyed,
        untracked(outcome.untracked)
    );
    Ok(Done::Ok)
}

/// Print the plan as text, with each node's `<nodeN-ip>` written as the address the
/// executor already knows for it (local: `127.0.0.1`; SLURM: once an allocation exists).
/// Paths keep their `<run-dir>` placeholder: the plan stays short and the same across
/// hosts. Written line by line as it is rendered: the text of a plan of 50,000
/// resources is 22 MB, and holding it (rendered, resolved, escaped) would take four
/// copies of it.
fn show(plan: &plan::Plan, exec: &dyn Executor) {
    let ips = Bindings {
        node_ips: exec.bindings().node_ips,
        run_dir: RUN_DIR.to_string(),
        node_hosts: Vec::new(),
    };
    let mut lines = ResolvedLines::new(&ips, std::io::BufWriter::new(std::io::stdout().lock()));
    // A closed stdout ends the output, as with `say_raw!`.
    let _ = plan::render::render_to(plan, &mut lines);
    let _ = lines.finish();
}

/// Text written through it reaches `out` a line at a time, each line with its
/// placeholders resolved by `ips` and its control characters escaped: what resolving
/// and escaping the whole text gives (no placeholder spans lines), holding one line.
struct ResolvedLines<'a, W: Write> {
    ips: &'a Bindings,
    line: String,
    out: W,
}

impl<'a, W: Write> ResolvedLines<'a, W> {
    fn new(ips: &'a Bindings, out: W) -> Self {
        ResolvedLines {
            ips,
            line: String::new(),
            out,
        }
    }

    fn emit(&mut self) -> std::io::Result<()> {
        let resolved = self.ips.resolve(&self.line);
        self.line.clear();
        self.out.write_all(srt::term::escape(&resolved).as_bytes())
    }

    /// Write what is left of the last line and flush.
    fn finish(mut self) -> std::io::Result<W> {
        self.emit()?;
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> std::fmt::Write for ResolvedLines<'_, W> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let mut rest = s;
        while let Some(nl) = rest.find('\n') {
            self.line.push_str(&rest[..=nl]);
            self.emit().map_err(|_| std::fmt::Error)?;
            rest = &rest[nl + 1..];
        }
        self.line.push_str(rest);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;

    /// Line by line, in any split of the text, gives what the whole text gives.
    #[test]
    fn resolved_lines_write_what_the_whole_text_resolves_to() {
        let ips = Bindings {
            node_ips: vec!["10.0.0.1".into(), "10.0.0.2".into()],
            run_dir: "/run/x".into(),
            node_hosts: Vec::new(),
        };
        let text = "a <node0-ip>:6100 <node1-ip>\n\nb <node2-ip> <run-dir>/log \u{1b}[31m\n<node01-ip> end";
        let whole = srt::term::escape(&ips.resolve(text)).into_owned();
        for piece in [1, 2, 3, 7, 64] {
            let mut lines = ResolvedLines::new(&ips, Vec::new());
            let chars: Vec<char> = text.chars().collect();
            for chunk in chars.chunks(piece) {
                lines.write_str(&chunk.iter().collect::<String>()).unwrap();
            }
            let out = lines.finish().unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), whole, "pieces of {piece}");
        }
    }
}
