//! Rolling replacement: processes replaced while the deployment serves.
//!
//! A replaced process is not stopped up front with everything else: its turn comes in
//! the walk, and its *unit* (a worker endpoint's processes together, or one Router, or
//! nginx) is replaced at once: taken out of its Routers, drained
//! (`rollout.drain_seconds`), stopped, started again, once healthy put back, and held
//! for `rollout.min_ready_seconds` (it must stay up). Availability rules, per group (a
//! role, or the Routers):
//!
//! - units that are down (refresh found them exited or unhealthy, or their last start
//!   failed) are replaced first, all at once: they serve nothing, and their replacement
//!   shows whether the change works before a serving unit is taken out;
//! - until one unit rolled and stayed up, one serving unit at a time is taken out;
//!   afterwards at most `rollout.max_unavailable` endpoints of a role, never all of
//!   them (a role of one endpoint has no other to serve meanwhile); Routers one at a
//!   time (behind nginx the others serve meanwhile);
//! - before a unit is taken out, the units its group rolled are checked again.
//!
//! If a unit fails (or a rolled one went down), the roll of its group stops there: the
//! units not reached keep running their old processes, the failure is reported, and the
//! next apply replaces what is left.

use super::members::Withdrawn;
use super::record::Recorder;
use super::{Apply, Event, StepError, StepResult};
use crate::graph::{Kind, Target};
use crate::plan::{Action, Observation, Reason};
use crate::state::Runtime;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a unit held for `rollout.min_ready_seconds` is checked.
const SETTLE_POLL: Duration = Duration::from_millis(200);
/// Timeout of one `/health` request of a rolled worker.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// The processes replaced together, and the group whose turns they take.
#[derive(Clone, Debug)]
pub(super) struct Unit {
    /// Graph positions, leader first.
    pub members: Vec<usize>,
    /// The turn group: a role, or a component (`router`: one at a time).
    pub group: String,
    /// Down before the roll (exited, unhealthy, failed, interrupted, stopped for a
    /// replacement): it serves nothing, so replacing it costs no availability.
    pub down: bool,
}

/// A unit that rolled: its processes and URLs, re-checked before the next unit of its
/// group is taken out.
#[derive(Clone, Debug)]
struct Rolled {
    address: String,
    processes: Vec<(String, Runtime)>,
    /// Its workers' health probes.
    probes: Vec<crate::launch::Probe>,
    /// Taken out only of Routers that list it on their command line: none routes to it
    /// until they restart, after its role rolled.
    awaits_restart: bool,
}

/// The turns of one group: how many of its units may be out at once, and what its roll
/// has shown so far.
struct Group {
    /// Units out at once, once the change is proven: `rollout.max_unavailable` of a
    /// role's endpoints, never all of them (1 for a role of one endpoint, and for
    /// Routers).
    budget: usize,
    turns: Mutex<Turns>,
    changed: tokio::sync::Notify,
}

#[derive(Default)]
struct Turns {
    /// Serving units taken out and not yet back for `rollout.min_ready_seconds`.
    out: usize,
    /// Units that have not had their turn yet.
    waiting: usize,
    /// A unit of the group rolled and stayed up: the change works.
    proven: bool,
    /// The units rolled so far.
    rolled: Vec<Rolled>,
    /// Why the group's roll stopped.
    halted: Option<String>,
}

/// What a roll shares across its units: the turns of each group.
pub(super) struct Roll {
    /// The unit each replaced process belongs to, by graph position.
    pub unit_of: HashMap<usize, usize>,
    /// The units.
    pub units: Vec<Unit>,
    groups: BTreeMap<String, Group>,
}

impl Roll {
    /// Whether `i` leads its unit (the unit is replaced when the leader's turn comes).
    pub(super) fn leader(&self, i: usize) -> Option<&Unit> {
        let u = &self.units[*self.unit_of.get(&i)?];
        (u.members[0] == i).then_some(u)
    }

    /// Per unit that serves, the units of its group that are down: they are replaced
    /// first, so their replacement shows the change works before a serving unit goes.
    pub(super) fn down_first(&self) -> Vec<(usize, Vec<usize>)> {
        // The down units of each group, found in one pass: a deployment with nothing
        // down costs one look at each unit.
        let mut down: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for d in self.units.iter().filter(|d| d.down) {
            down.entry(d.group.as_str()).or_default().push(d.members[0]);
        }
        if down.is_empty() {
            return Vec::new();
        }
        self.units
            .iter()
            .filter(|u| !u.down)
            .filter_map(|u| Some((u.members[0], down.get(u.group.as_str())?.clone())))
            .collect()
    }

    /// Why serving unit `leader` is skipped when down unit `failed` of its group (which
    /// it waited for) failed: the change did not work, so it keeps serving.
    pub(super) fn kept_serving(&self, leader: usize, failed: usize) -> Option<String> {
        let unit = self.leader(leader).filter(|u| !u.down)?;
        let first = self
            .leader(failed)
            .is_some_and(|d| d.down && d.group == unit.group);
        first.then(|| {
            format!(
                "not taken out, it keeps serving: the change failed on a down endpoint of `{}`, replaced first",
                unit.group
            )
        })
    }
}

impl Apply<'_> {
    /// Which processes roll when replaced, by graph position: every one, unless apply
    /// was asked to replace everything at once ([`Apply::at_once`]), but those on (or
    /// naming) an allocation that is replaced before it is created again (it is not
    /// live): nothing on it survives, so they stop first, with the rest of what goes.
    /// (What runs on a live allocation replaced by one created first rolls onto it.)
    pub(super) fn rolling(&self) -> Vec<bool> {
        let replaced: std::collections::HashSet<&str> = self
            .plan
            .changes
            .iter()
            .filter(|c| {
                c.kind == Kind::Allocation && c.action == Action::Replace && !c.create_first
            })
            .map(|c| c.address.as_str())
            .collect();
        self.graph
            .resources
            .iter()
            .map(|r| {
                !self.at_once
                    && r.kind.is_process()
                    && !r.deps.iter().any(|d| replaced.contains(d.as_str()))
            })
            .collect()
    }

    /// Group the processes `actions` replaces into units, and size each group's turns.
    pub(super) fn plan_roll(&self, actions: &[Action]) -> Roll {
        let mut by_key: BTreeMap<String, usize> = BTreeMap::new();
        let mut units: Vec<Unit> = Vec::new();
        let mut unit_of = HashMap::new();
        for (i, r) in self.graph.resources.iter().enumerate() {
            if actions[i] != Action::Replace || !r.kind.is_process() {
                continue;
            }
            let Target::Process(p) = r.target else {
                continue;
            };
            let process = &self.launch.processes[p];
            let (key, group) = match (&process.worker, r.kind) {
                (Some(w), _) => (
                    format!("{}[{}]", w.role.name(), w.endpoint),
                    w.role.name().to_string(),
                ),
                (None, Kind::Component(c)) => (r.address.clone(), c.name.to_string()),
                (None, _) => (r.address.clone(), r.address.clone()),
            };
            let u = *by_key.entry(key).or_insert_with(|| {
                units.push(Unit {
                    members: Vec::new(),
                    group,
                    down: false,
                });
                units.len() - 1
            });
            units[u].members.push(i);
            units[u].down |= self.was_down(&r.address);
            unit_of.insert(i, u);
        }
        let endpoints = self.endpoints();
        let mut groups: BTreeMap<String, Group> = BTreeMap::new();
        for u in &units {
            groups.entry(u.group.clone()).or_insert_with(|| {
                let budget = match endpoints.get(&u.group) {
                    Some(&n) => self
                        .launch
                        .rollout
                        .max_unavailable
                        .of(n)
                        .min(n.saturating_sub(1))
                        .max(1),
                    None => 1,
                };
                Group {
                    budget,
                    turns: Mutex::new(Turns::default()),
                    changed: tokio::sync::Notify::new(),
                }
            });
            groups[&u.group].turns.lock().expect("turns lock").waiting += 1;
        }
        Roll {
            unit_of,
            units,
            groups,
        }
    }

    /// Endpoints per role.
    fn endpoints(&self) -> BTreeMap<String, usize> {
        let mut endpoints: BTreeMap<String, usize> = BTreeMap::new();
        for w in self
            .launch
            .processes
            .iter()
            .filter_map(|p| p.worker.as_ref())
        {
            if w.node_rank == 0 {
                *endpoints.entry(w.role.name().to_string()).or_default() += 1;
            }
        }
        endpoints
    }

    /// Whether the process at `address` served nothing when the plan was made: refresh
    /// found it exited or unhealthy, or its last start failed or was cut short.
    fn was_down(&self, address: &str) -> bool {
        self.plan.change(address).is_some_and(|c| {
            c.reasons.iter().any(|x| {
                matches!(
                    x,
                    Reason::Drift { .. }
                        | Reason::Failed { .. }
                        | Reason::Interrupted
                        | Reason::Tainted
                )
            })
        })
    }

    /// Replace one unit in its turn: re-check the units its group rolled, roll it, and
    /// hold it for `rollout.min_ready_seconds`. A failure stops its group's roll.
    pub(super) async fn roll_unit(
        &self,
        rec: &Recorder<'_>,
        roll: &Roll,
        unit: &Unit,
    ) -> StepResult {
        let group = &roll.groups[&unit.group];
        self.take_turn(group, unit).await?;
        // Its own roll, from its turn: not the wait for the units before it.
        let t = Instant::now();
        let result = self.roll_in_turn(rec, group, unit).await;
        {
            let mut turns = group.turns.lock().expect("turns lock");
            turns.out -= usize::from(!unit.down);
            match &result {
                Ok((_, rolled)) => {
                    turns.proven = true;
                    turns.rolled.push(rolled.clone());
                }
                Err(e) if !e.skipped => {
                    let leader = &self.graph.resources[unit.members[0]].address;
                    let why = format!("the roll of `{}` stopped at `{leader}`", unit.group);
                    turns.halted.get_or_insert(why);
                }
                Err(_) => {}
            }
        }
        group.changed.notify_waiters();
        result.map(|(detail, _)| format!("{detail} in {:.1}s", t.elapsed().as_secs_f64()))
    }

    /// Wait for the unit's turn. A unit that is down takes none (it serves nothing, and
    /// the walk replaces it before the group's serving units). A serving unit goes when
    /// fewer than the budget are out, and, until a unit of the group has rolled and
    /// stayed up, only when no other is out: the first shows the change works.
    async fn take_turn(&self, group: &Group, unit: &Unit) -> Result<(), StepError> {
        loop {
            let changed = group.changed.notified();
            {
                let mut turns = group.turns.lock().expect("turns lock");
                if let Some(why) = turns.halted.clone() {
                    turns.waiting -= 1;
                    return Err(StepError::skip(&why));
                }
                let limit = if turns.proven { group.budget } else { 1 };
                if unit.down || turns.out < limit {
                    turns.out += usize::from(!unit.down);
                    turns.waiting -= 1;
                    return Ok(());
                }
            }
            tokio::select! {
                () = changed => {}
                () = self.cancel.cancelled() => return Err(StepError::skip("apply was interrupted")),
            }
        }
    }

    /// In its turn: the rolled units of the group still up, then the unit rolled and
    /// held.
    async fn roll_in_turn(
        &self,
        rec: &Recorder<'_>,
        group: &Group,
        unit: &Unit,
    ) -> Result<(String, Rolled), StepError> {
        let rolled = group.turns.lock().expect("turns lock").rolled.clone();
        for r in &rolled {
            if let Some((process, detail)) = self.check_rolled(r).await {
                let leader = &self.graph.resources[unit.members[0]].address;
                let e = self.rolled_died(rec, r, &process, &detail).await;
                return Err(StepError::caused_by(
                    format!("`{leader}` was not taken out: {}", e.message),
                    process,
                ));
            }
        }
        let (detail, rolled) = self.roll_unit_now(rec, unit).await?;
        self.settle(rec, &rolled, self.hold(group, &rolled)).await?;
        Ok((detail, rolled))
    }

    /// How long a rolled unit is held: `rollout.min_ready_seconds`, except for the last
    /// unit of its group when no Router routes to it until one restarts (holding it
    /// would only lengthen the time nothing serves; the gates after the restart watch
    /// it): then it is checked once.
    fn hold(&self, group: &Group, rolled: &Rolled) -> Duration {
        let last = group.turns.lock().expect("turns lock").waiting == 0;
        if rolled.awaits_restart && last {
            return Duration::ZERO;
        }
        Duration::from_secs(self.launch.rollout.min_ready_seconds)
    }

    /// Hold a rolled unit for `hold`, checking it every [`SETTLE_POLL`]: its processes
    /// alive, its workers answering `/health`.
    async fn settle(
        &self,
        rec: &Recorder<'_>,
        rolled: &Rolled,
        hold: Duration,
    ) -> Result<(), StepError> {
        let t = Instant::now();
        loop {
            if let Some((process, detail)) = self.check_rolled(rolled).await {
                let detail = format!(
                    "{detail}, {:.1}s after it became healthy (held {}s, `rollout.min_ready_seconds`)",
                    t.elapsed().as_secs_f64(),
                    hold.as_secs()
                );
                return Err(self.rolled_died(rec, rolled, &process, &detail).await);
            }
            let Some(left) = hold.checked_sub(t.elapsed()).filter(|d| !d.is_zero()) else {
                return Ok(());
            };
            tokio::select! {
                () = tokio::time::sleep(SETTLE_POLL.min(left)) => {}
                () = self.cancel.cancelled() => return Err("interrupted".into()),
            }
        }
    }

    /// The first process of a rolled unit that is gone, or worker whose health probe
    /// fails, and what was seen.
    async fn check_rolled(&self, rolled: &Rolled) -> Option<(String, String)> {
        for (address, rt) in &rolled.processes {
            if let Observation::Gone(detail) = self.exec.observe(rt).await {
                return Some((address.clone(), detail));
            }
        }
        let http = super::members::http();
        let bindings = self.exec.bindings();
        let resolve = |s: &str| bindings.resolve(s);
        for probe in &rolled.probes {
            let seen =
                tokio::time::timeout(HEALTH_TIMEOUT, crate::probe::once(&http, probe, &resolve))
                    .await;
            match seen {
                Ok(Ok(_)) => {}
                Ok(Err(why)) => return Some((rolled.address.clone(), why.to_string())),
                Err(_) => {
                    let what = crate::launch::render::describe_probe(probe);
                    return Some((
                        rolled.address.clone(),
                        format!("{}: no answer", resolve(&what)),
                    ));
                }
            }
        }
        None
    }

    /// A rolled unit went down: take it out of its Routers again, record its process as
    /// failed (the next plan replaces it), and say where its log is.
    async fn rolled_died(
        &self,
        rec: &Recorder<'_>,
        rolled: &Rolled,
        process: &str,
        detail: &str,
    ) -> StepError {
        let workers: Vec<&str> = rolled.processes.iter().map(|(a, _)| a.as_str()).collect();
        for w in &workers {
            // Best effort: a Router that cannot be told sends it nothing it can serve
            // anyway, and the next apply syncs the membership.
            let _ = self.withdraw(rec, w).await;
        }
        let error = format!("rolled, then went down: {detail}");
        let runtime = rolled
            .processes
            .iter()
            .find(|(a, _)| a == process)
            .map(|(_, rt)| rt);
        if let Err(e) = rec.went_down(process, runtime, &error) {
            return StepError::from(e);
        }
        StepError::caused_by(
            format!(
                "`{process}` {error}; the units not reached keep their old processes (its log: `srt logs {} {process}`)",
                self.launch.deployment
            ),
            process.to_string(),
        )
    }

    /// Replace one unit, in these steps (each a function of [`UnitRoll`]):
    ///
    /// 1. `withdraw`: its workers out of every Router that routes to them;
    /// 2. `drain`: their requests in flight finish;
    /// 3. `stop`: the old processes stopped (the replacement binds their ports);
    /// 4. `launch`: started again, in one launch batch;
    /// 5. `confirm`: each start confirmed by the executor;
    /// 6. `ready`: its workers healthy;
    /// 7. `restore`: back into its Routers; a restarted Router, once it answers, gets
    ///    its members back.
    async fn roll_unit_now(
        &self,
        rec: &Recorder<'_>,
        unit: &Unit,
    ) -> Result<(String, Rolled), StepError> {
        let roll = self.unit_roll(rec, unit);
        let withdrawn = roll.withdraw().await?;
        roll.drain(&withdrawn).await;
        // A Router's members, to give back to its new process (its stop empties them).
        let members_before = roll.members_before();
        roll.stop().await?;
        let started = roll.launch()?;
        let confirmed = roll.confirm(started).await?;
        roll.ready(&confirmed).await?;
        let detail = roll.restore(&withdrawn, members_before).await?;
        Ok((detail, roll.rolled(confirmed, &withdrawn)))
    }

    /// What the steps of `unit`'s roll share: its resources, its workers' URLs, its
    /// Routers.
    fn unit_roll<'r>(&'r self, rec: &'r Recorder<'r>, unit: &'r Unit) -> UnitRoll<'r> {
        let resources: Vec<&crate::graph::Resource> = unit
            .members
            .iter()
            .map(|&i| &self.graph.resources[i])
            .collect();
        let processes: Vec<&crate::launch::LaunchProcess> = resources
            .iter()
            .filter_map(|r| match r.target {
                Target::Process(p) => Some(&self.launch.processes[p]),
                _ => None,
            })
            .collect();
        let urls: Vec<String> = processes
            .iter()
            .filter_map(|p| p.worker.as_ref()?.advertised_url.clone())
            .collect();
        let probes: Vec<crate::launch::Probe> = processes
            .iter()
            .filter_map(|p| p.worker.as_ref()?.health_probe())
            .collect();
        let routers: Vec<&str> = resources
            .iter()
            .filter(|r| matches!(r.kind, Kind::Component(_)))
            .map(|r| r.address.as_str())
            .collect();
        UnitRoll {
            apply: self,
            rec,
            unit,
            resources,
            urls,
            probes,
            routers,
        }
    }

    /// A restarted Router: once it answers, the members it had (still desired) again.
    async fn give_back(
        &self,
        rec: &Recorder<'_>,
        membership: &str,
        members: &[(String, String)],
    ) -> Result<(), StepError> {
        let Some([frontend, admin_url]) = rec.read(|s| {
            let r = s.resources.get(membership)?;
            Some(
                r.spec
                    .get_strs(["frontend", "admin_url"])
                    .map(Option::unwrap_or_default),
            )
        }) else {
            return Ok(());
        };
        let Some(admin) =
            crate::frontend::lookup(&frontend).and_then(super::super::frontend::Frontend::admin)
        else {
            return Ok(());
        };
        let url = self.exec.bindings().resolve(&admin_url);
        let http = super::members::http();
        let deadline = Instant::now() + Duration::from_secs(self.health.timeout_secs);
        while !admin.live(&http, &url).await {
            if Instant::now() >= deadline {
                return Err(format!("the restarted Router did not answer at {url}").into());
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(10)) => {}
                _ = self.cancel.cancelled() => return Err("interrupted".into()),
            }
        }
        let withdrawn: Vec<Withdrawn> = members
            .iter()
            .map(|(url, worker)| Withdrawn {
                membership: Some(membership.to_string()),
                worker: worker.clone(),
                url: url.clone(),
            })
            .collect();
        self.put_back(rec, &withdrawn).await
    }

    /// nginx's configuration changed: rewrite it and reload nginx in place.
    pub(super) async fn reload_in_place(&self, rec: &Recorder<'_>, i: usize) -> StepResult {
        let r = &self.graph.resources[i];
        let Target::Process(p) = r.target else {
            return Err("not a process".into());
        };
        let runtime = rec
            .runtime(&r.address)
            .ok_or_else(|| StepError::from(format!("`{}` has no recorded process", r.address)))?;
        self.exec
            .reload(&runtime, &self.launch.processes[p])
            .await
            .map_err(|e| StepError::from(e.to_string()))?;
        rec.update(&r.address, |x| {
            x.spec = r.spec.clone();
            x.hash = r.hash.clone();
            x.dependencies = r.deps.clone();
        })?;
        Ok("configuration reloaded".to_string())
    }
}

/// One unit's roll under way: what its steps share.
struct UnitRoll<'r> {
    apply: &'r Apply<'r>,
    rec: &'r Recorder<'r>,
    unit: &'r Unit,
    /// Its resources, leader first.
    resources: Vec<&'r crate::graph::Resource>,
    /// Its workers' URLs (none for a Router or nginx), what a drain asks.
    urls: Vec<String>,
    /// Its workers' health probes (none for a Router or nginx).
    probes: Vec<crate::launch::Probe>,
    /// Its Routers' addresses.
    routers: Vec<&'r str>,
}

impl UnitRoll<'_> {
    /// Its workers out of every Router that routes to them.
    async fn withdraw(&self) -> Result<Vec<Withdrawn>, StepError> {
        let mut withdrawn: Vec<Withdrawn> = Vec::new();
        for r in self.resources.iter().filter(|r| r.kind == Kind::Worker) {
            withdrawn.extend(self.apply.withdraw(self.rec, &r.address).await?);
        }
        Ok(withdrawn)
    }

    /// Its requests in flight finish. A worker that is down (stopped, unhealthy,
    /// exited) serves nothing to drain.
    async fn drain(&self, withdrawn: &[Withdrawn]) {
        if !withdrawn.is_empty() && !self.unit.down {
            let leader = &self.resources[0].address;
            let runtime = self.rec.runtime(leader);
            self.apply.drain(leader, &self.urls, runtime.as_ref()).await;
        }
    }

    /// The members of its Routers' managed memberships, by membership.
    fn members_before(&self) -> Vec<(String, Vec<(String, String)>)> {
        self.rec.read(|s| {
            s.resources
                .iter()
                .filter(|(_, r)| {
                    r.kind == Kind::Membership
                        && r.spec
                            .get_str("router")
                            .is_some_and(|x| self.routers.contains(&x.as_str()))
                })
                .map(|(a, r)| (a.clone(), crate::plan::members_of(&r.spec)))
                .collect()
        })
    }

    /// The old processes stopped (the replacement binds their ports), recorded as
    /// stopped for a replacement (if apply stops here, the next plan replaces them).
    async fn stop(&self) -> Result<(), StepError> {
        for r in &self.resources {
            (self.apply.events)(Event::Started {
                address: r.address.clone(),
                action: "stopping",
            });
        }
        let runtimes: Vec<(&str, Option<Runtime>)> = self
            .resources
            .iter()
            .map(|r| (r.address.as_str(), self.rec.runtime(&r.address)))
            .collect();
        let exec = self.apply.exec;
        let stops = runtimes.iter().map(|(_, rt)| async move {
            match rt {
                Some(rt) => exec.stop(rt).await.map_err(|e| e.to_string()),
                None => Ok(()),
            }
        });
        let stopped = futures::future::join_all(stops).await;
        let unit: Vec<&str> = runtimes.iter().map(|&(a, _)| a).collect();
        let done: Vec<&str> = unit
            .iter()
            .zip(&stopped)
            .filter(|(_, r)| r.is_ok())
            .map(|(&a, _)| a)
            .collect();
        self.rec.tainted(&unit, &done, &self.routers)?;
        if let Some((address, Err(e))) = unit.iter().zip(&stopped).find(|(_, r)| r.is_err()) {
            return Err(format!("stopping `{address}`: {e}").into());
        }
        Ok(())
    }

    /// Started again, in one launch batch.
    fn launch(&self) -> Result<Vec<(usize, crate::exec::Started)>, StepError> {
        let batch: Vec<(usize, Action)> = self
            .unit
            .members
            .iter()
            .map(|&i| (i, Action::Replace))
            .collect();
        let mut started = Vec::new();
        for (i, result) in self.apply.launch_batch(self.rec, &batch, &mut Vec::new()) {
            match result {
                Ok(st) => started.push((i, st)),
                Err(e) => {
                    let address = self.apply.graph.resources[i].address.clone();
                    return Err(StepError::caused_by(e, address));
                }
            }
        }
        Ok(started)
    }

    /// Each start confirmed by the executor: the processes and their runtimes.
    async fn confirm(
        &self,
        started: Vec<(usize, crate::exec::Started)>,
    ) -> Result<Vec<(String, Runtime)>, StepError> {
        let mut confirmed = Vec::new();
        for (i, st) in started {
            let address = self.apply.graph.resources[i].address.clone();
            self.apply
                .confirm_launch(self.rec, i, st)
                .await
                .map_err(|e| StepError::caused_by(e.message, address.clone()))?;
            if let Some(rt) = self.rec.runtime(&address) {
                confirmed.push((address, rt));
            }
        }
        Ok(confirmed)
    }

    /// Its workers healthy (a Router is waited for as its members are given back).
    async fn ready(&self, confirmed: &[(String, Runtime)]) -> Result<(), StepError> {
        if self.probes.is_empty() {
            return Ok(());
        }
        self.apply.wait_serving(&self.probes, confirmed).await
    }

    /// Back into its Routers; a restarted Router gets the members it had back.
    async fn restore(
        &self,
        withdrawn: &[Withdrawn],
        members_before: Vec<(String, Vec<(String, String)>)>,
    ) -> StepResult {
        if self.probes.is_empty() {
            for (membership, members) in members_before {
                self.apply
                    .give_back(self.rec, &membership, &members)
                    .await?;
            }
            return Ok("rolled".to_string());
        }
        self.apply.put_back(self.rec, withdrawn).await?;
        Ok(
            match withdrawn.iter().filter(|w| w.membership.is_some()).count() {
                // It registered itself: its health probe saw its frontend list it.
                0 if withdrawn.is_empty() => "rolled; registered and serving".to_string(),
                n => format!("rolled; {n} Router(s) route to it again"),
            },
        )
    }

    /// What the roll leaves to check again before the next unit of its group goes.
    fn rolled(self, confirmed: Vec<(String, Runtime)>, withdrawn: &[Withdrawn]) -> Rolled {
        Rolled {
            address: self.resources[0].address.clone(),
            processes: confirmed,
            probes: self.probes,
            awaits_restart: !withdrawn.is_empty()
                && withdrawn.iter().all(|w| w.membership.is_none()),
        }
    }
}
