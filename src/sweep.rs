//! `srt sweep`: a sweep's points as successive applies in one deployment (see
//! docs/sweeps.md). The plan lists every point, what it replaces relative to the one
//! before and the worker starts that costs; apply runs the points in turn, each an apply
//! replacing at once only what its values change, then its benchmark; progress is
//! recorded in the state, so a sweep run again goes on at the first unfinished point.

use crate::deploy::{self, Common};
use crate::progress::{self, Mode};
use crate::{CmdResult, Done, ExpectedError};
use srt::apply::{self, Apply, Cancel, Outcome};
use srt::exec::Executor;
use srt::plan::{Action, Plan, PlanOptions};
use srt::recipe::sweep::{Point, Sweep};
use srt::recipe::{Recipe, Source};
use srt::state::{State, StateLock, StateStore, SweepOutcome, SweepPoint};
use srt::sweep::results::{self, PointResult, Summary};
use srt::sweep::{Order, Shape, Step};
use srt::term::plural;
use srt::workflow::{self, OpError, PrepareOptions, Prepared, Setup};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A line for the user: on stdout, or on stderr when stdout is the JSON summary's.
macro_rules! tell {
    ($json:expr, $($t:tt)*) => {
        if $json {
            shout!($($t)*)
        } else {
            say!($($t)*)
        }
    };
}

/// Arguments of `srt sweep`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Recipe file with a `sweep:` block.
    #[arg(
        short = 'f',
        long = "file",
        value_name = "RECIPE",
        required_unless_present = "results"
    )]
    file: Option<PathBuf>,
    /// Print the table of a sweep's results directory again (`.srt/NAME/sweep`), and
    /// nothing else.
    #[arg(long, value_name = "DIR", conflicts_with = "file")]
    results: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
    /// Show the sweep's plan and stop.
    #[arg(long)]
    plan: bool,
    /// Do not ask for confirmation.
    #[arg(long)]
    auto_approve: bool,
    /// Go on with the next point when one fails (its reason is recorded); without it,
    /// the sweep stops at the first failed point.
    #[arg(long)]
    keep_going: bool,
    /// Resources worked on at once.
    #[arg(long, default_value_t = 10)]
    parallelism: usize,
    /// Print only errors, a line per point and the summary.
    #[arg(long, short)]
    quiet: bool,
    /// Print the summary as JSON (with `--results`: the summary file).
    #[arg(long)]
    json: bool,
}

/// A point with its loaded recipe.
struct Loaded {
    point: Point,
    recipe: Recipe,
    /// Whether the recipe sets `rollout:` (then its points roll as an apply does).
    rolls: bool,
}

/// A point skipped because its parallel sizes do not fit its GPUs
/// ([`srt::assemble::misfit`]).
struct Unfit {
    point: Point,
    reason: String,
}

/// What the sweep needs to run its points.
struct Sweeping<'a> {
    args: &'a Args,
    source: Source,
    points: Vec<Loaded>,
    unfit: Vec<Unfit>,
    options: PrepareOptions,
    store: StateStore,
    lock: StateLock,
    name: String,
    /// Per point (written order): its shape, desired hash and curve.
    shapes: Vec<Shape>,
    hashes: Vec<String>,
    curves: Vec<String>,
    order: Order,
    results_dir: PathBuf,
}

/// Run `srt sweep`.
pub(crate) fn sweep(args: Args) -> CmdResult {
    if let Some(dir) = &args.results {
        return print_results(dir, args.json);
    }
    let file = args
        .file
        .as_deref()
        .expect("clap requires --file or --results");
    let mut options = args.common.prepare_options();
    let (source, points, unfit) = load(file, &args.common.selection(), &options)?;
    let nodes = largest(&source, &points, options.nodes)?;
    options.nodes = Some(nodes);
    let name = points[0].recipe.name.value.clone();
    let exec = workflow::executor(&points[0].recipe, nodes, &options)?;
    let store = StateStore::new(workflow::deployment_dir(&options.state_dir, &name));
    let lock = store.lock("sweep", args.common.lock_wait())?;
    let state = workflow::load_or_create(&store, &name, &lock)?;
    workflow::restore(&*exec, &state)?;
    let (exec, shapes, hashes) = lower_all(&source, &points, exec, &options)?;
    let order = srt::sweep::order(&shapes);
    let params: Vec<Vec<(String, String)>> = points.iter().map(|l| params(&l.point)).collect();
    let curves = srt::sweep::curves(&shapes, &params);
    let results_dir = store.dir().join("sweep");
    let s = Sweeping {
        args: &args,
        source,
        points,
        unfit,
        options,
        store,
        lock,
        name,
        shapes,
        hashes,
        curves,
        order,
        results_dir,
    };
    s.show_plan(&state, nodes);
    if args.plan {
        return Ok(Done::Ok);
    }
    crate::deploy::confirm("run these points", args.auto_approve)?;
    s.run(exec, state)
}

/// The recipe's points (of the override file's variant `selection` picks), each
/// loaded, checked and resolved against the cluster profile as a recipe; those whose
/// parallel sizes do not fit their GPUs apart. At least one point fits.
fn load(
    file: &Path,
    selection: &srt::recipe::Selection,
    options: &PrepareOptions,
) -> Result<(Source, Vec<Loaded>, Vec<Unfit>), ExpectedError> {
    let (source, first) = srt::recipe::load_file_selected(file, selection);
    first?;
    let stem = srt::recipe::load::default_name(file);
    let root = srt::recipe::yaml::parse(&source.text)
        .map_err(|_| OpError::Other("the recipe no longer parses".into()))?;
    if !srt::recipe::sweep::is_sweep(&root) {
        return Err(ExpectedError::Usage(format!(
            "{} has no `sweep:` block: apply it with `srt apply -f {}`",
            file.display(),
            file.display()
        )));
    }
    let (root, _) = srt::recipe::srtctl::variant(root, selection).map_err(|p| source.error(p))?;
    let sweep = Sweep::new(&root).map_err(|p| source.error(p))?;
    crate::report_warnings(&source, &sweep.warnings);
    let mut points = Vec::new();
    let mut unfit = Vec::new();
    let build = srt::assemble::BuildOptions {
        nodes: options.nodes,
        ..Default::default()
    };
    let mut first_misfit = None;
    for i in 0..sweep.len() {
        let point = sweep.point(i);
        let mut recipe =
            srt::recipe::load::load_tree(&point.recipe, &source, &stem).map_err(|p| {
                shout!(
                    "error: point {} of {} ({}):",
                    i + 1,
                    sweep.len(),
                    point.describe()
                );
                source.error(p)
            })?;
        workflow::resolve_aliases(&mut recipe, options)?;
        if let Some(misfit) = srt::assemble::misfit(&recipe, &build) {
            unfit.push(Unfit {
                point,
                reason: misfit.reason(),
            });
            first_misfit.get_or_insert(misfit);
            continue;
        }
        let rolls = has_key(&point.recipe, "rollout");
        points.push(Loaded {
            point,
            recipe,
            rolls,
        });
    }
    if let (true, Some(misfit)) = (points.is_empty(), first_misfit) {
        shout!(
            "error: no point of the sweep's {} fits its GPUs; the first:",
            sweep.len()
        );
        return Err(source.error(misfit.0).into());
    }
    Ok((source, points, unfit))
}

/// A point's parameters as its name writes their values.
fn params(point: &Point) -> Vec<(String, String)> {
    point
        .params
        .iter()
        .map(|(k, v)| (k.clone(), srt::recipe::sweep::py_str(v)))
        .collect()
}

fn has_key(root: &srt::recipe::yaml::Node, key: &str) -> bool {
    matches!(&root.value, srt::recipe::yaml::Value::Map(m) if m.iter().any(|(k, _)| k.name == key))
}

/// The most nodes any point needs: the one allocation every point runs in.
fn largest(source: &Source, points: &[Loaded], nodes: Option<usize>) -> Result<usize, OpError> {
    let mut most = 0;
    for (i, l) in points.iter().enumerate() {
        let n = workflow::node_count(source, &l.recipe, nodes).inspect_err(|_| {
            shout!("error: point {} ({}):", i + 1, l.point.describe());
        })?;
        most = most.max(n);
    }
    Ok(most)
}

/// The shared executor back, and per point its shape and desired hash.
type Lowered = (Box<dyn Executor>, Vec<Shape>, Vec<String>);

/// Every point's graph lowered (on the executor they share): its shape and hash.
fn lower_all(
    source: &Source,
    points: &[Loaded],
    mut exec: Box<dyn Executor>,
    options: &PrepareOptions,
) -> Result<Lowered, OpError> {
    let mut shapes = Vec::new();
    let mut hashes = Vec::new();
    let mut shown = std::collections::BTreeSet::new();
    for l in points {
        let p = Setup::of(source.clone(), l.recipe.clone(), exec, options).lower()?;
        let fresh: Vec<_> = p
            .launch
            .warnings
            .iter()
            .filter(|w| shown.insert(w.message.clone()))
            .cloned()
            .collect();
        crate::report_warnings(&p.source, &fresh);
        shapes.push(Shape::of(&p.graph, gpus(&p)));
        hashes.push(p.recipe_hash.clone());
        exec = p.exec;
    }
    Ok((exec, shapes, hashes))
}

/// GPUs the workers of a launch plan use.
fn gpus(p: &Prepared) -> usize {
    p.launch
        .processes
        .iter()
        .filter(|q| q.kind == srt::launch::ProcessKind::Worker)
        .map(|q| q.devices.len())
        .sum()
}

/// The shape of what the state records as running.
fn recorded(state: &State) -> Shape {
    Shape::from_processes(
        state
            .resources
            .iter()
            .filter(|(_, r)| r.kind.is_process())
            .map(|(a, r)| (a.clone(), r.kind, r.hash.clone())),
        0,
    )
}

/// What a step replaces (and stops), in a few words.
fn describe_step(step: &Step, first: bool) -> String {
    match (step.starts.is_empty(), step.stops.len()) {
        (_, 0) => describe_starts(step, first),
        (true, n) => format!(
            "stops {}, starts nothing (keeps {})",
            few(&step.stops, n),
            plural(step.workers_kept, "worker", "workers")
        ),
        (false, n) => format!(
            "{}; stops {}",
            describe_starts(step, first),
            few(&step.stops, n)
        ),
    }
}

/// Up to four addresses, then how many more.
fn few(addresses: &[String], n: usize) -> String {
    let shown: Vec<&str> = addresses.iter().take(4).map(String::as_str).collect();
    match n.saturating_sub(4) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

fn describe_starts(step: &Step, first: bool) -> String {
    if step.starts.is_empty() {
        return format!(
            "keeps every process ({}): benchmark only",
            plural(step.workers_kept, "worker", "workers")
        );
    }
    if first && step.workers_kept == 0 {
        return format!(
            "starts {}: {}",
            plural(step.starts.len(), "process", "processes"),
            plural(step.worker_starts, "worker start", "worker starts")
        );
    }
    let replaced: Vec<String> = step
        .starts
        .iter()
        .filter(|a| !step.new.contains(a))
        .cloned()
        .collect();
    let what = match (replaced.len(), step.new.len()) {
        (r, 0) => format!("replaces {}", few(&replaced, r)),
        (0, n) => format!("starts {}", few(&step.new, n)),
        (r, n) => format!(
            "replaces {}, starts {}",
            few(&replaced, r),
            few(&step.new, n)
        ),
    };
    format!(
        "{what}: {} (keeps {})",
        plural(step.worker_starts, "worker start", "worker starts"),
        plural(step.workers_kept, "worker", "workers")
    )
}

impl Sweeping<'_> {
    fn done(&self, state: &State, i: usize) -> bool {
        state
            .sweep
            .as_ref()
            .is_some_and(|s| s.done(&self.point_name(i), &self.hashes[i]))
    }

    fn point_name(&self, i: usize) -> String {
        self.points[i].point.name(&self.name)
    }

    /// The plan: every point in the order it runs, what it replaces, and the cost.
    fn show_plan(&self, state: &State, nodes: usize) {
        let n = self.points.len();
        tell!(self.args.json,
            "Sweep of {n} points in deployment `{}`: one deployment on {nodes} node(s), sized for the largest point.\n",
            self.name
        );
        self.show_unfit();
        let mut prev = recorded(state);
        let mut starts = 0;
        let mut first = prev.workers == 0;
        for (k, &i) in self.order.points.iter().enumerate() {
            let name = self.point_name(i);
            let what = if self.done(state, i) {
                "done: skipped (recorded in the state)".to_string()
            } else {
                let step = srt::sweep::step(Some(&prev), &self.shapes[i]);
                starts += step.worker_starts;
                prev = self.shapes[i].clone();
                let d = describe_step(&step, first);
                first = false;
                d
            };
            tell!(
                self.args.json,
                "  {:>3}. {name} ({})",
                k + 1,
                self.points[i].point.describe()
            );
            tell!(self.args.json, "       {what}");
        }
        if self.order.reordered() {
            tell!(self.args.json,
                "\nPoints reordered to restart less: {} worker starts instead of {} in the written order (each point is followed by the one that starts the fewest workers).",
                self.order.worker_starts,
                self.order.written_worker_starts
            );
        }
        tell!(self.args.json,
            "\nSweep: {n} points, {starts} worker starts to run what is left; {} for the whole sweep in one deployment, {} to run every point as a fresh deployment.",
            self.order.worker_starts,
            srt::sweep::fresh_starts(&self.shapes)
        );
    }

    /// The points skipped, a few of them by name and why.
    fn show_unfit(&self) {
        const SHOWN: usize = 8;
        if self.unfit.is_empty() {
            return;
        }
        tell!(
            self.args.json,
            "Skipped: {} whose parallel sizes do not fit their GPUs:",
            plural(self.unfit.len(), "point", "points")
        );
        for u in self.unfit.iter().take(SHOWN) {
            tell!(
                self.args.json,
                "  - {} ({}): {}",
                u.point.name(&self.name),
                u.point.describe(),
                u.reason
            );
        }
        if self.unfit.len() > SHOWN {
            tell!(
                self.args.json,
                "  ... and {} more",
                self.unfit.len() - SHOWN
            );
        }
        tell!(self.args.json, "");
    }

    /// Run every point not done, in order.
    fn run(self, mut exec: Box<dyn Executor>, state: State) -> CmdResult {
        let rt = deploy::runtime();
        let cancel = Cancel::default();
        let shared = apply::shared(state);
        deploy::install_signals(&rt, cancel.clone(), shared.clone());
        let mode = Mode::choose(self.args.quiet || self.args.json, false);
        let started = Instant::now();
        let mut summary = self.summary_so_far(&shared.lock().expect("state mutex"));
        let mut failed = 0;
        let count = self.order.points.len();
        for (k, &i) in self.order.points.iter().enumerate() {
            if self.done(&shared.lock().expect("state mutex"), i) {
                continue;
            }
            if cancel.is_cancelled() {
                // Interrupted between points: the next one is not started.
                return Err(self.interrupted(&summary));
            }
            tell!(
                self.args.json,
                "\n=== Point {}/{count}: {} ({})",
                k + 1,
                self.point_name(i),
                self.points[i].point.describe()
            );
            let (back, ran) = self.run_point(i, exec, &rt, &cancel, &shared, mode)?;
            exec = back;
            let outcome = ran.outcome;
            let result = self.record(i, &ran.result, &shared)?;
            summary.worker_starts += result.worker_starts;
            replace_point(&mut summary, result.clone());
            self.write_results(&summary);
            self.report_point(&result);
            if outcome.interrupted {
                return Err(self.interrupted(&summary));
            }
            if result.status == "failed" {
                failed += 1;
                if !self.args.keep_going {
                    shout!("The sweep stops at its first failed point (pass --keep-going to go on); run it again to go on from this point.");
                    break;
                }
            }
        }
        self.finish(&summary, started, failed)
    }

    fn report_point(&self, result: &PointResult) {
        let why = result
            .reason
            .as_deref()
            .map(|r| format!(": {}", r.lines().next().unwrap_or_default()))
            .unwrap_or_default();
        tell!(
            self.args.json,
            "Point {}: {} in {:.1} s, {}{why}",
            result.name,
            result.status,
            result.wall_seconds,
            plural(result.worker_starts, "worker start", "worker starts")
        );
    }

    /// A sweep stopped by a signal: what is done is recorded, the rest runs next time.
    fn interrupted(&self, summary: &Summary) -> ExpectedError {
        self.write_results(summary);
        let done = summary.points.iter().filter(|p| p.status == "done").count();
        ExpectedError::Cancelled(format!(
            "Sweep interrupted: {done} of {} points done, recorded in the state; run the same `srt sweep` again to go on at the first unfinished point.",
            self.points.len()
        ))
    }

    /// Results of the points done before this run (from the results directory), the
    /// others pending, in the order they run.
    fn summary_so_far(&self, state: &State) -> Summary {
        let before = results::load(&self.results_dir).ok();
        let points = self
            .order
            .points
            .iter()
            .map(|&i| {
                let name = self.point_name(i);
                let summarized = before.as_ref().and_then(|b| {
                    b.points
                        .iter()
                        .find(|p| p.name == name && p.status == "done")
                });
                match (self.done(state, i), summarized) {
                    (true, Some(p)) => p.clone(),
                    // Recorded done, but killed before the summary was written: its
                    // result file was written first.
                    (true, None) => self.read_back(i),
                    (false, _) => self.pending(i),
                }
            })
            .chain(self.unfit.iter().map(|u| self.unfit_result(u)))
            .collect::<Vec<_>>();
        Summary {
            format_version: results::FORMAT_VERSION,
            deployment: self.name.clone(),
            worker_starts: before.as_ref().map_or(0, |b| {
                b.points
                    .iter()
                    .filter(|p| {
                        points
                            .iter()
                            .any(|q| q.name == p.name && q.status == "done")
                    })
                    .map(|p| p.worker_starts)
                    .sum()
            }),
            fresh_worker_starts: srt::sweep::fresh_starts(&self.shapes),
            points,
            curves: Vec::new(),
        }
    }

    /// A point recorded done, read back from its result file.
    fn read_back(&self, i: usize) -> PointResult {
        let file = results::point_file(&self.results_dir, &self.point_name(i));
        PointResult {
            status: "done".into(),
            levels: srt::bench::result::load(&file).unwrap_or_default(),
            result: file.file_name().map(|n| n.to_string_lossy().into_owned()),
            ..self.pending(i)
        }
    }

    fn unfit_result(&self, u: &Unfit) -> PointResult {
        PointResult {
            name: u.point.name(&self.name),
            params: params(&u.point),
            curve: String::new(),
            status: "unfit".into(),
            reason: Some(u.reason.clone()),
            gpus: 0,
            worker_starts: 0,
            wall_seconds: 0.0,
            result: None,
            levels: Vec::new(),
        }
    }

    fn pending(&self, i: usize) -> PointResult {
        PointResult {
            name: self.point_name(i),
            params: params(&self.points[i].point),
            curve: self.curves[i].clone(),
            status: "pending".into(),
            reason: None,
            gpus: self.shapes[i].gpus,
            worker_starts: 0,
            wall_seconds: 0.0,
            result: None,
            levels: Vec::new(),
        }
    }

    /// Plan and apply point `i` on `exec`; give the executor back with what it did.
    fn run_point(
        &self,
        i: usize,
        exec: Box<dyn Executor>,
        rt: &tokio::runtime::Runtime,
        cancel: &Cancel,
        shared: &apply::Shared,
        mode: Mode,
    ) -> Result<(Box<dyn Executor>, Ran), ExpectedError> {
        let t = Instant::now();
        let l = &self.points[i];
        let setup = Setup::of(self.source.clone(), l.recipe.clone(), exec, &self.options);
        let lock = &self.lock;
        let (p, read) = setup.plan_live(
            |s| {
                let state = workflow::load_or_create(&s.store, &s.recipe.name.value, lock)?;
                workflow::restore(&*s.exec, &state)?;
                Ok(((), state))
            },
            &PlanOptions::default(),
        )?;
        let ((), state, plan) = read?;
        *shared.lock().expect("state mutex") = state;
        tell!(
            self.args.json,
            "{}",
            srt::plan::render::summary_line(&plan).trim_end()
        );
        deploy::refuse_missing_programs(&p, &plan)?;
        deploy::refuse_missing_tokenizer(&p, &plan)?;
        deploy::refuse_taken_ports(&p, &plan, &shared.lock().expect("state mutex"))?;
        let events = progress::printer(mode);
        let before = srt::bench::result::latest(p.store.dir());
        let outcome = rt.block_on(
            Apply {
                launch: p.runnable(),
                graph: &p.graph,
                plan: &plan,
                exec: &*p.exec,
                store: &p.store,
                lock,
                parallelism: self.args.parallelism,
                at_once: !l.rolls,
                health: p.recipe.health_check.clone(),
                cancel: cancel.clone(),
                events: &events,
            }
            .run(shared),
        );
        {
            let mut s = shared.lock().expect("state mutex");
            if outcome.failed.is_empty() && !outcome.interrupted {
                s.recipe_hash = Some(p.recipe_hash.clone());
            }
            p.store.save(lock, &mut s)?;
        }
        let run = srt::bench::result::latest(p.store.dir()).filter(|r| Some(r) != before.as_ref());
        let levels = run
            .as_ref()
            .and_then(|r| srt::bench::result::load(r).ok())
            .unwrap_or_default();
        let result = PointResult {
            status: status(&outcome).into(),
            reason: reason(&outcome),
            worker_starts: worker_starts(&plan, &outcome),
            wall_seconds: t.elapsed().as_secs_f64(),
            levels,
            ..self.pending(i)
        };
        Ok((p.exec, Ran { outcome, result }))
    }

    /// Record a point's outcome in the state (an interrupted point stays unfinished)
    /// and write its result file.
    fn record(
        &self,
        i: usize,
        result: &PointResult,
        shared: &apply::Shared,
    ) -> Result<PointResult, ExpectedError> {
        let mut result = result.clone();
        if result.status != "pending" && !result.levels.is_empty() {
            match results::write_point(&self.results_dir, &result) {
                Ok(path) => {
                    result.result = path.file_name().map(|n| n.to_string_lossy().into_owned());
                }
                Err(e) => shout!("warning: {e}"),
            }
        }
        let outcome = match result.status.as_str() {
            "done" => SweepOutcome::Done,
            "failed" => SweepOutcome::Failed,
            _ => return Ok(result),
        };
        let mut s = shared.lock().expect("state mutex");
        s.sweep.get_or_insert_with(Default::default).points.insert(
            result.name.clone(),
            SweepPoint {
                hash: self.hashes[i].clone(),
                outcome,
                reason: result.reason.clone(),
            },
        );
        self.store.save(&self.lock, &mut s)?;
        Ok(result)
    }

    fn write_results(&self, summary: &Summary) {
        if let Err(e) = results::write(&self.results_dir, summary) {
            shout!("warning: {e}");
        }
    }

    fn finish(&self, summary: &Summary, started: Instant, failed: usize) -> CmdResult {
        self.write_results(summary);
        let done = summary.points.iter().filter(|p| p.status == "done").count();
        if self.args.json {
            let summary = &Summary {
                curves: summary.curves(),
                ..summary.clone()
            };
            say_exact!(
                "{}",
                serde_json::to_string_pretty(summary).unwrap_or_default()
            );
        } else {
            say!("\nSweep results ({}):", self.results_dir.display());
            say_raw!("{}", results::table(summary));
            say!(
                "Plot: {} (and .png)",
                self.results_dir.join("pareto.svg").display()
            );
            let skipped = match self.unfit.len() {
                0 => String::new(),
                n => format!(" ({n} skipped: they do not fit their GPUs)"),
            };
            say!(
                "\nSweep: {done} of {} points done, {failed} failed, in {:.1} s{skipped}.",
                self.points.len(),
                started.elapsed().as_secs_f64()
            );
        }
        match failed {
            0 => Ok(Done::Ok),
            n => Err(ExpectedError::PointsFailed(format!(
                "{n} point(s) of the sweep failed; their reasons are in the table above and in the state (run `srt sweep` again to retry them)"
            ))),
        }
    }
}

/// What a point's apply did.
struct Ran {
    outcome: Outcome,
    result: PointResult,
}

fn status(o: &Outcome) -> &'static str {
    match (o.interrupted, o.failed.is_empty() && !o.no_space) {
        (true, _) => "pending",
        (false, true) => "done",
        (false, false) => "failed",
    }
}

fn reason(o: &Outcome) -> Option<String> {
    (!o.failed.is_empty()).then(|| {
        o.failed
            .iter()
            .map(|f| {
                format!(
                    "{}: {}",
                    f.address,
                    f.error.lines().next().unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    })
}

/// Worker processes a point's apply started (created or replaced, not skipped).
fn worker_starts(plan: &Plan, o: &Outcome) -> usize {
    plan.changes
        .iter()
        .filter(|c| c.kind == srt::graph::Kind::Worker)
        .filter(|c| matches!(c.action, Action::Create | Action::Replace))
        .filter(|c| !o.skipped.contains(&c.address))
        .count()
}

fn replace_point(summary: &mut Summary, result: PointResult) {
    if let Some(p) = summary.points.iter_mut().find(|p| p.name == result.name) {
        *p = result;
    }
}

/// `srt sweep --results DIR`.
fn print_results(dir: &Path, json: bool) -> CmdResult {
    let summary = results::load(dir).map_err(ExpectedError::NotFound)?;
    if json {
        say_exact!(
            "{}",
            serde_json::to_string_pretty(&summary).unwrap_or_default()
        );
    } else {
        say_raw!("{}", results::table(&summary));
    }
    Ok(Done::Ok)
}
