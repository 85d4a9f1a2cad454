//! `srt plan`, `srt apply`, `srt destroy`.

use super::progress::{self, Mode};
use super::report;
use crate::apply::{self, Apply, Cancel};
use crate::exit;
use crate::ops::{self, OpError, PrepareOptions, Prepared};
use crate::plan::file::PlanFile;
use crate::plan::{self, PlanOptions};
use crate::recipe::Source;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

/// Options shared by plan, apply and destroy.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
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
}

impl Common {
    fn prepare_options(&self) -> PrepareOptions {
        PrepareOptions {
            state_dir: self.state_dir.clone(),
            nodes: self.nodes,
            simulate: self.simulate,
            grace: Duration::from_secs(10),
            cluster: self.cluster.clone(),
        }
    }
    fn lock_wait(&self) -> Option<Duration> {
        (self.lock_timeout > 0).then(|| Duration::from_secs(self.lock_timeout))
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
    /// Replace this resource even if unchanged (repeatable).
    #[arg(long, value_name = "ADDRESS")]
    replace: Vec<String>,
    /// After the plan, show for every replaced resource which hash inputs changed.
    #[arg(long)]
    explain: bool,
}

/// Arguments of `srt apply`.
#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    /// A plan saved with `srt plan -o FILE` (instead of `-f RECIPE`).
    #[arg(value_name = "PLAN_FILE", conflicts_with = "file")]
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
    /// Replace this resource even if unchanged (repeatable).
    #[arg(long, value_name = "ADDRESS")]
    replace: Vec<String>,
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
    #[arg(value_name = "NAME", required_unless_present = "file")]
    name: Option<String>,
    /// Recipe file whose deployment to destroy.
    #[arg(short = 'f', long = "file", value_name = "RECIPE")]
    file: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
    /// Do not ask for confirmation.
    #[arg(long)]
    auto_approve: bool,
}

fn fail(e: OpError) -> i32 {
    let code = e.exit_code();
    report(&e);
    code
}

/// Run `srt plan`.
pub fn plan(args: PlanArgs) -> i32 {
    let p = match ops::prepare_file(&args.file, &args.common.prepare_options()) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let lock = match p.store.lock("plan", args.common.lock_wait()) {
        Ok(l) => l,
        Err(e) => return fail(e.into()),
    };
    let state = match ops::load_or_create(&p.store, &p.recipe.name.value, &lock) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    drop(lock);
    if let Err(e) = ops::restore(&*p.exec, &state) {
        return fail(e);
    }
    let options = PlanOptions {
        replace: args.replace.iter().cloned().collect(),
        destroy: false,
    };
    let plan = ops::make_plan(&p, &state, &options);
    if args.json {
        say!("{}", plan::render::json(&plan));
    } else {
        say_raw!("{}", plan::render::render(&plan));
        if args.explain {
            say!("\nWhy each resource is replaced:");
            say_raw!("{}", plan::render::explain(&plan, &state, &p.graph));
        }
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
        if let Err(e) = file.save(out) {
            return fail(OpError::Other(format!(
                "cannot write {}: {e}",
                out.display()
            )));
        }
        if !args.json {
            say!(
                "\nSaved the plan to {}. Apply exactly it with: srt apply {}",
                out.display(),
                out.display()
            );
        }
    }
    if args.detailed_exitcode && plan.has_changes() {
        exit::CHANGES
    } else {
        exit::OK
    }
}

fn confirm(question: &str, auto_approve: bool) -> Result<(), i32> {
    if auto_approve {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        eprintln!("error: refusing to {question} without confirmation: stdin is not a terminal; pass --auto-approve");
        return Err(exit::NOT_CONFIRMED);
    }
    say_raw!("\nDo you want to {question}? Only 'yes' will be accepted: ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    if line.trim() == "yes" {
        Ok(())
    } else {
        eprintln!("Cancelled.");
        Err(exit::NOT_CONFIRMED)
    }
}

/// Install SIGINT/SIGTERM handling: the first signal cancels (start nothing new, stop
/// waiting in gates); the second saves state and exits with 130.
fn install_signals(
    rt: &tokio::runtime::Runtime,
    cancel: Cancel,
    p: &Prepared,
    state: apply::Shared,
) {
    let store = p.store.clone();
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
                eprintln!("\nInterrupt received: starting nothing new, waiting for steps in flight, then saving state. Signal again to exit at once.");
                cancel.trigger();
            } else {
                // Taking the state mutex waits for a launch batch being recorded; every
                // launched process is on disk with its identity (at most the latest
                // port-check and gate results are not: they are re-checked by the next
                // apply), and the lock is an flock the kernel releases on exit.
                let _guard = state.lock();
                let _ = &store;
                eprintln!("Second interrupt: state is saved; exiting.");
                std::process::exit(exit::INTERRUPTED);
            }
        }
    });
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Run `srt apply`.
pub fn apply(args: ApplyArgs) -> i32 {
    let saved = match &args.plan_file {
        Some(path) => match PlanFile::load(path) {
            Ok(f) => Some(f),
            Err(e) => return fail(e.into()),
        },
        None => None,
    };
    let mut options = args.common.prepare_options();
    let prepared = match (&saved, &args.file) {
        (Some(f), _) => {
            options.nodes = f.nodes;
            options.simulate = f.simulate;
            let stem = std::path::Path::new(&f.recipe_name)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            ops::prepare(
                Source {
                    name: f.recipe_name.clone(),
                    text: f.recipe_text.clone(),
                },
                &stem,
                &options,
            )
        }
        (None, Some(file)) => ops::prepare_file(file, &options),
        (None, None) => unreachable!("clap requires one"),
    };
    let p = match prepared {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let lock = match p.store.lock("apply", args.common.lock_wait()) {
        Ok(l) => l,
        Err(e) => return fail(e.into()),
    };
    if let Some(prev) = lock.previous_holder_died() {
        eprintln!(
            "note: taking over the lock left by pid {} ({}@{}, `{}`), which is no longer running",
            prev.pid, prev.user, prev.host, prev.operation
        );
    }
    let state = match ops::load_or_create(&p.store, &p.recipe.name.value, &lock) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    if let Err(e) = ops::restore(&*p.exec, &state) {
        return fail(e);
    }
    let plan = match &saved {
        Some(f) => {
            if let Err(e) = f.check_fresh(&state.lineage, state.serial, &p.recipe_hash) {
                return fail(e.into());
            }
            f.plan.clone()
        }
        None => {
            let options = PlanOptions {
                replace: args.replace.iter().cloned().collect(),
                destroy: false,
            };
            let plan = ops::make_plan(&p, &state, &options);
            if args.json {
                progress::plan_events(&plan);
            } else {
                say_raw!("{}", plan::render::render(&plan));
            }
            if plan.has_changes() {
                if args.json && !args.auto_approve {
                    eprintln!("error: --json cannot ask for confirmation; pass --auto-approve");
                    return exit::NOT_CONFIRMED;
                }
                if let Err(code) = confirm("perform these actions", args.auto_approve) {
                    return code;
                }
            }
            plan
        }
    };
    let rt = runtime();
    let cancel = Cancel::default();
    let shared = apply::shared(state);
    install_signals(&rt, cancel.clone(), &p, shared.clone());
    let mode = Mode::choose(args.quiet, args.json);
    let events = progress::printer(mode);
    let run = Apply {
        launch: &p.launch,
        graph: &p.graph,
        plan: &plan,
        exec: &*p.exec,
        store: &p.store,
        lock: &lock,
        parallelism: args.parallelism,
        health: p.recipe.health_check.clone(),
        cancel,
        events: &events,
    };
    let outcome = rt.block_on(run.run(&shared));
    {
        let mut s = shared.lock().expect("state mutex");
        if outcome.failed.is_empty() && !outcome.interrupted {
            s.recipe_hash = Some(p.recipe_hash.clone());
        }
        if let Err(e) = p.store.save(&lock, &mut s) {
            return fail(e.into());
        }
    }
    drop(lock);
    summarize(&p, &outcome, mode)
}

fn summarize(p: &Prepared, o: &apply::Outcome, mode: Mode) -> i32 {
    let url = p.exec.bindings().resolve(&p.launch.public_url);
    if mode == Mode::Json {
        progress::outcome_event(o, &url);
    }
    if o.interrupted {
        eprintln!("Apply interrupted: {} created, {} replaced, {} destroyed before stopping. State is saved; run `srt plan` to see what remains.", o.created, o.replaced, o.destroyed);
        return exit::INTERRUPTED;
    }
    if !o.failed.is_empty() {
        eprintln!(
            "\nApply failed: {} resource(s) failed, {} skipped.",
            o.failed.len(),
            o.skipped.len()
        );
        for (a, e) in &o.failed {
            eprintln!("  {a}: {}", e.lines().next().unwrap_or_default());
            // A process that failed to come up: show its own log (gate errors already
            // carry the log of the process that died).
            if !e.contains("--- last lines of its log ---") {
                let tail = p
                    .exec
                    .log_tail(a, 20)
                    .map(|t| match t.rfind("--- srt: starting ") {
                        Some(i) => t[i..].to_string(),
                        None => t,
                    });
                if let Some(tail) = tail.filter(|t| !t.trim().is_empty()) {
                    eprintln!("  --- last lines of {a}'s log ---");
                    for line in tail.lines() {
                        eprintln!("  | {line}");
                    }
                }
            }
        }
        eprintln!(
            "Applied before the failure: {} created, {} replaced, {} destroyed.",
            o.created, o.replaced, o.destroyed
        );
        return exit::APPLY_FAILED;
    }
    if mode == Mode::Json {
        return exit::OK;
    }
    if o.created + o.replaced + o.destroyed == 0 {
        say!(
            "\nApply complete: nothing to change; {} check(s) passed.",
            o.checked
        );
    } else {
        say!(
            "\nApply complete: {} created, {} replaced, {} destroyed.",
            o.created,
            o.replaced,
            o.destroyed
        );
    }
    say!("Router: {url}");
    say!(
        "Try: curl -s {url}/v1/completions -H 'content-type: application/json' -d '{{\"model\": \"{}\", \"prompt\": \"Hello\", \"max_tokens\": 16}}'",
        p.launch.served_model_name
    );
    exit::OK
}

/// Run `srt destroy`.
pub fn destroy(args: DestroyArgs) -> i32 {
    let name = match (&args.name, &args.file) {
        (Some(n), _) => n.clone(),
        (None, Some(f)) => match crate::recipe::load_file(f) {
            (_, Ok(r)) => r.name.value,
            (_, Err(e)) => return fail(e.into()),
        },
        (None, None) => unreachable!("clap requires one"),
    };
    let dir = ops::deployment_dir(&args.common.state_dir, &name);
    let store = crate::state::StateStore::new(&dir);
    let lock = match store.lock("destroy", args.common.lock_wait()) {
        Ok(l) => l,
        Err(e) => return fail(e.into()),
    };
    let state = match store.load() {
        Ok(Some(s)) => s,
        Ok(None) => {
            say!(
                "No state for deployment `{name}` under {}: nothing to destroy.",
                args.common.state_dir.display()
            );
            return exit::OK;
        }
        Err(e) => return fail(e.into()),
    };
    let profile = match ops::cluster_profile(args.common.cluster.as_deref()) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let exec = ops::executor_for_state(profile, &name, &dir, &state);
    if let Err(e) = ops::restore(&*exec, &state) {
        return fail(e);
    }
    let (launch, graph) = ops::empty(&name);
    let observed = ops::refresh(&state, &*exec);
    let plan = plan::diff(
        &graph,
        &state,
        &observed,
        "",
        &PlanOptions {
            replace: Default::default(),
            destroy: true,
        },
    );
    say_raw!("{}", plan::render::render(&plan));
    if !plan.has_changes() {
        return exit::OK;
    }
    if let Err(code) = confirm(
        "destroy every resource of this deployment",
        args.auto_approve,
    ) {
        return code;
    }
    let rt = runtime();
    let events = progress::printer(Mode::choose(false, false));
    let shared = apply::shared(state);
    let run = Apply {
        launch: &launch,
        graph: &graph,
        plan: &plan,
        exec: &*exec,
        store: &store,
        lock: &lock,
        parallelism: 10,
        health: crate::recipe::HealthCheck {
            timeout_secs: 1,
            interval_secs: 1,
        },
        cancel: Cancel::default(),
        events: &events,
    };
    let outcome = rt.block_on(run.run(&shared));
    if !outcome.failed.is_empty() {
        eprintln!(
            "Destroy incomplete: {} resource(s) could not be stopped; they stay in state.",
            outcome.failed.len()
        );
        return exit::APPLY_FAILED;
    }
    say!("\nDestroy complete: {} destroyed.", outcome.destroyed);
    exit::OK
}
