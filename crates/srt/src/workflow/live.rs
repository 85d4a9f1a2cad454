//! A plan against the live world, its work spread over two threads.
//!
//! A plan needs the desired graph (the launch plan lowered: CPU work on the recipe) and
//! the recorded state, refreshed against the world (a file read, then one `/proc` read
//! and one `/health` probe per recorded process, and each Router's worker list). Neither
//! needs the other, so [`plan_live`] lowers on the calling thread while another reads,
//! recovers and refreshes the state.
//!
//! The diff needs the graph and the state, and of refresh only what it found gone
//! ([`Observation::Gone`]: drift): so it starts as soon as the graph and the state
//! exist, while refresh still runs. When refresh finds nothing gone, that diff is the
//! plan; when it finds drift, the diff is worked out again with what it saw. The plan
//! is the same either way ([`plan::diff`] reads nothing else of an observation).
//!
//! A plan with [`PlanOptions::skip_refresh`] (`--refresh=false`) only reads and recovers
//! there. A recipe that does not lower is the plan's error; a refresh not begun by then
//! is skipped.

use super::{recover, refresh, OpError};
use crate::exec::Executor;
use crate::graph::ResourceGraph;
use crate::plan::{self, Observation, Plan, PlanOptions};
use crate::state::State;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// What a plan is made against: a lowered recipe's graph and recipe hash.
pub trait Desired {
    /// The desired resource graph.
    fn graph(&self) -> &ResourceGraph;
    /// The hash of the desired graph (the plan's `recipe_hash`).
    fn recipe_hash(&self) -> &str;
}

/// How long the parts of [`plan_live`] took. Refresh and the first diff run at the same
/// time, on two threads.
#[derive(Clone, Copy, Debug, Default)]
pub struct Times {
    /// The state read (`read`, with what it does besides).
    pub read: Duration,
    /// Recover and refresh.
    pub refresh: Duration,
    /// The diffs (two when refresh found drift).
    pub diff: Duration,
    /// Whether refresh found drift, and the diff was worked out again.
    pub rediffed: bool,
}

/// What [`Setup::plan_live`](super::Setup::plan_live) gives back besides the prepared
/// recipe: what `read` returned besides the state, the state and the plan, or why the
/// state could not be read.
pub type Planned<R> = Result<(R, State, Plan), OpError>;

/// What [`plan_live`] gives back once the state is read.
#[derive(Debug)]
pub struct Live<R> {
    /// What `read` returned besides the state (a lock, say).
    pub read: R,
    /// The state, with the identities recovered from leases (in memory).
    pub state: State,
    /// The plan, with the orphans recover found.
    pub plan: Plan,
    /// How long the parts took.
    pub times: Times,
}

/// Lower (`lower`, on this thread) while the state is read (`read`: lock, load,
/// restore), recovered and refreshed (on another thread, health probes allowed
/// `unhealthy_grace`; only recovered with [`PlanOptions::skip_refresh`]), and plan with
/// `options` as described in the module docs. A lowering error comes first; a read
/// error comes with what was lowered (whose warnings the caller still shows), as with
/// [`Setup::lower_while`](super::Setup::lower_while).
pub fn plan_live<L: Desired, R: Send>(
    lower: impl FnOnce() -> Result<L, OpError>,
    read: impl FnOnce() -> Result<(R, State), OpError> + Send,
    exec: &dyn Executor,
    unhealthy_grace: Option<Duration>,
    options: &PlanOptions,
) -> Result<(L, Result<Live<R>, OpError>), OpError> {
    // The state once read and recovered: shared by refresh (there) and the diff (here).
    let slot: OnceLock<State> = OnceLock::new();
    let (ready, wait) = std::sync::mpsc::channel::<()>();
    // Set when the recipe does not lower: the plan is that error, and a refresh not yet
    // begun is not begun (at scale it takes longer than the read).
    let refused = AtomicBool::new(false);
    let (lowered, side, first) = std::thread::scope(|s| {
        let (slot, refused) = (&slot, &refused);
        let side = s.spawn(move || {
            let t = Instant::now();
            let (r, mut state) = read()?;
            let read_time = t.elapsed();
            let t = Instant::now();
            let orphans = recover(&mut state, exec);
            let state = slot.get_or_init(|| state);
            // Dropped unsent when the read fails: the diff is not waited for then.
            let _ = ready.send(());
            let seen = if options.skip_refresh || refused.load(Ordering::Acquire) {
                BTreeMap::new()
            } else {
                refresh(state, exec, unhealthy_grace)
            };
            Ok::<_, OpError>((r, orphans, seen, read_time, t.elapsed()))
        });
        let lowered = lower();
        refused.store(lowered.is_err(), Ordering::Release);
        let first = match &lowered {
            Ok(l) if wait.recv().is_ok() => {
                let t = Instant::now();
                let state = slot.get().expect("sent once set");
                let none = BTreeMap::new();
                let plan = plan::diff(l.graph(), state, &none, l.recipe_hash(), options);
                Some((plan, t.elapsed()))
            }
            _ => None,
        };
        let side = side
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (lowered, side, first)
    });
    let lowered = lowered?;
    let (read, orphans, seen, read_time, refresh_time) = match side {
        Ok(side) => side,
        Err(e) => return Ok((lowered, Err(e))),
    };
    let state = slot.into_inner().expect("read succeeded");
    let (mut plan, mut diff_time) = first.expect("lowered and read");
    let rediffed = seen
        .values()
        .any(|o| matches!(o, Observation::Gone(_) | Observation::Renew(_)));
    if rediffed {
        let t = Instant::now();
        let graph = lowered.graph();
        plan = plan::diff(graph, &state, &seen, lowered.recipe_hash(), options);
        diff_time += t.elapsed();
    }
    plan.orphans = orphans;
    if !options.skip_refresh {
        plan.allocations = exec.allocation_notes(&state);
    }
    let live = Live {
        read,
        state,
        plan,
        times: Times {
            read: read_time,
            refresh: refresh_time,
            diff: diff_time,
            rediffed,
        },
    };
    Ok((lowered, Ok(live)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::fake::{Behaviour, FakeExecutor};
    use crate::launch::{LaunchPlan, LaunchProcess, ProcessKind};
    use crate::plan::{Action, Reason};
    use crate::state::{ResourceState, Status};

    #[derive(Debug)]
    struct Lowered(ResourceGraph);

    impl Desired for Lowered {
        fn graph(&self) -> &ResourceGraph {
            &self.0
        }

        fn recipe_hash(&self) -> &str {
            "h"
        }
    }

    /// Three workers; `port` is the first one's `--port`.
    fn graph(port: &str) -> ResourceGraph {
        let mut launch = LaunchPlan::empty("t");
        launch.processes = (0..3)
            .map(|i| {
                let p = if i == 0 {
                    port.to_string()
                } else {
                    i.to_string()
                };
                let argv = ["vllm", "serve", "--port", p.as_str()];
                LaunchProcess::bare(
                    &format!("worker.agg[{i}].node[0]"),
                    ProcessKind::Worker,
                    argv.into(),
                )
            })
            .collect();
        crate::graph::lower(&launch, &serde_json::Value::Null).unwrap()
    }

    /// What an apply of `graph("0")` recorded, each process with a runtime of `exec`.
    fn applied(exec: &FakeExecutor) -> State {
        let mut state = State::new("t");
        for r in &graph("0").resources {
            let mut record = ResourceState::of(r, Status::Running);
            if r.kind.is_process() {
                record.runtime = Some(exec.runtime(&r.address));
            }
            state.resources.insert(r.address.clone(), record);
        }
        state
    }

    /// An executor whose refresh finds the third worker gone (`exited`).
    fn third_worker_gone() -> FakeExecutor {
        let gone = Behaviour {
            gone: Some("exited".into()),
            ..Default::default()
        };
        FakeExecutor::new().with("worker.agg[2].node[0]", gone)
    }

    fn planned(port: &str, exec: &FakeExecutor, state: State) -> (Lowered, Live<()>) {
        let options = PlanOptions::default();
        let lower = || Ok(Lowered(graph(port)));
        let (lowered, live) = plan_live(lower, || Ok(((), state)), exec, None, &options).unwrap();
        (lowered, live.unwrap())
    }

    #[test]
    fn without_drift_the_diff_made_beside_refresh_is_the_plan() {
        let exec = FakeExecutor::new();
        let state = applied(&exec);
        let (lowered, live) = planned("7", &exec, state.clone());
        assert_eq!(exec.observed(), 3, "each recorded process probed once");
        assert!(!live.times.rediffed);
        assert_eq!(live.state, state);
        let seen = refresh(&state, &exec, None);
        let expected = plan::diff(&lowered.0, &state, &seen, "h", &PlanOptions::default());
        assert_eq!(live.plan, expected);
        let replaced: Vec<&str> = live
            .plan
            .changes
            .iter()
            .filter(|c| c.action == Action::Replace)
            .map(|c| c.address.as_str())
            .collect();
        assert_eq!(replaced, ["worker.agg[0].node[0]"]);
    }

    #[test]
    fn drift_refresh_finds_is_planned_again_with_what_it_saw() {
        let exec = third_worker_gone();
        let state = applied(&exec);
        let (lowered, live) = planned("0", &exec, state.clone());
        assert!(live.times.rediffed);
        let change = live.plan.change("worker.agg[2].node[0]").unwrap();
        assert_eq!(change.action, Action::Replace);
        assert_eq!(
            change.reasons,
            [Reason::Drift {
                detail: "exited".into()
            }]
        );
        assert_eq!(live.plan.drift.len(), 1);
        let seen = refresh(&state, &exec, None);
        let expected = plan::diff(&lowered.0, &state, &seen, "h", &PlanOptions::default());
        assert_eq!(live.plan, expected);
    }

    #[test]
    fn without_refresh_nothing_is_probed_and_the_plan_says_so() {
        let exec = third_worker_gone();
        let state = applied(&exec);
        let options = PlanOptions {
            skip_refresh: true,
            ..Default::default()
        };
        let lower = || Ok(Lowered(graph("0")));
        let read = || Ok(((), state.clone()));
        let (lowered, live) = plan_live(lower, read, &exec, None, &options).unwrap();
        let live = live.unwrap();
        // Nothing is probed, and the dead worker is not seen: the plan is the diff against
        // the records alone.
        assert_eq!(exec.observed(), 0);
        assert!(!live.times.rediffed);
        assert!(!live.plan.has_changes());
        assert!(live.plan.drift.is_empty());
        assert!(!live.plan.refreshed);
        let none = BTreeMap::new();
        let expected = plan::diff(&lowered.0, &state, &none, "h", &options);
        assert_eq!(live.plan, expected);
        // Said first in the text, and in the JSON; absent from a refreshed plan's JSON.
        let text = plan::render::render(&live.plan);
        assert!(text.starts_with(plan::render::NOT_REFRESHED), "{text}");
        let json: serde_json::Value =
            serde_json::from_str(&plan::render::json(&live.plan)).unwrap();
        assert_eq!(json["refreshed"], false);
        let (_, refreshed) = planned("0", &exec, state.clone());
        assert!(refreshed.plan.refreshed);
        assert!(!plan::render::render(&refreshed.plan).contains("not refreshed"));
        let json: serde_json::Value =
            serde_json::from_str(&plan::render::json(&refreshed.plan)).unwrap();
        assert!(json.get("refreshed").is_none(), "{json}");
        // A saved plan keeps it; one saved before the field existed was refreshed.
        let saved = serde_json::to_value(&live.plan).unwrap();
        let back: Plan = serde_json::from_value(saved.clone()).unwrap();
        assert_eq!(back, live.plan);
        let mut older = saved;
        older.as_object_mut().unwrap().remove("refreshed");
        let back: Plan = serde_json::from_value(older).unwrap();
        assert!(back.refreshed);
    }

    #[test]
    fn a_lowering_error_comes_first_and_a_read_error_with_the_lowered() {
        let exec = FakeExecutor::new();
        let options = PlanOptions::default();
        let lower = || Err::<Lowered, _>(OpError::Other("lower".into()));
        let read = || Err::<((), State), _>(OpError::Other("read".into()));
        let err = plan_live(lower, read, &exec, None, &options).unwrap_err();
        assert_eq!(err.to_string(), "lower");
        // A refresh that would begin after the recipe failed to lower does not.
        let lower = || Err::<Lowered, _>(OpError::Other("lower".into()));
        let state = applied(&exec);
        let read = || {
            std::thread::sleep(Duration::from_millis(200));
            Ok(((), state))
        };
        let err = plan_live(lower, read, &exec, None, &options).unwrap_err();
        assert_eq!(err.to_string(), "lower");
        assert_eq!(exec.observed(), 0);
        // A read error comes with what was lowered.
        let lower = || Ok(Lowered(graph("0")));
        let read = || Err::<((), State), _>(OpError::Other("read".into()));
        let (lowered, read) = plan_live(lower, read, &exec, None, &options).unwrap();
        assert_eq!(lowered.0.resources.len(), graph("0").resources.len());
        assert_eq!(read.unwrap_err().to_string(), "read");
    }
}
