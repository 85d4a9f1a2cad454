//! Rolling replacement: processes replaced while the deployment serves.
//!
//! A replaced process is not stopped up front with everything else: its turn comes in
//! the walk, and its *unit* (a worker endpoint's processes together, or one Router, or
//! nginx) is replaced at once: taken out of its Routers, drained
//! (`rollout.drain_seconds`), stopped, started again, and, once healthy, put back. At
//! most `rollout.max_unavailable` endpoints of a role are out at a time, and Routers go
//! one at a time (behind nginx the others serve meanwhile). If a unit fails, the roll of
//! its group stops there: the units not reached keep running their old processes, the
//! failure is reported, and the next apply replaces what is left.

use super::members::Withdrawn;
use super::{Apply, Event, Shared, StepError, StepResult};
use crate::graph::{Kind, Target};
use crate::plan::Action;
use crate::state::Status;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The processes replaced together, and the group whose permits they take.
#[derive(Clone, Debug)]
pub(super) struct Unit {
    /// Graph positions, leader first.
    pub members: Vec<usize>,
    /// The permit group: a role, or `routers`.
    pub group: String,
}

/// What a roll shares across its units: permits per group, and the groups stopped by a
/// failure.
pub(super) struct Roll {
    /// The unit each replaced process belongs to, by graph position.
    pub unit_of: HashMap<usize, usize>,
    /// The units.
    pub units: Vec<Unit>,
    permits: BTreeMap<String, Arc<tokio::sync::Semaphore>>,
    halted: Mutex<BTreeMap<String, String>>,
}

impl Roll {
    /// Whether `i` leads its unit (the unit is replaced when the leader's turn comes).
    pub(super) fn leader(&self, i: usize) -> Option<&Unit> {
        let u = &self.units[*self.unit_of.get(&i)?];
        (u.members[0] == i).then_some(u)
    }
}

impl Apply<'_> {
    /// Whether replaced processes roll: always, unless the allocation they run on is
    /// replaced (then everything stops first, as nothing survives it).
    pub(super) fn rolling(&self) -> bool {
        !self
            .plan
            .changes
            .iter()
            .any(|c| c.kind == Kind::Allocation && c.action == Action::Replace)
    }

    /// Group the processes `actions` replaces into units, and size each group's permits.
    pub(super) fn plan_roll(&self, actions: &[Action]) -> Roll {
        let mut by_key: BTreeMap<String, usize> = BTreeMap::new();
        let mut units: Vec<Unit> = Vec::new();
        let mut unit_of = HashMap::new();
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
                (None, Kind::Router) => (r.address.clone(), "routers".to_string()),
                _ => (r.address.clone(), r.address.clone()),
            };
            let u = *by_key.entry(key).or_insert_with(|| {
                units.push(Unit {
                    members: Vec::new(),
                    group,
                });
                units.len() - 1
            });
            units[u].members.push(i);
            unit_of.insert(i, u);
        }
        let mut permits = BTreeMap::new();
        for u in &units {
            permits.entry(u.group.clone()).or_insert_with(|| {
                let n = match endpoints.get(&u.group) {
                    Some(&n) => self.launch.rollout.max_unavailable.of(n),
                    None => 1,
                };
                Arc::new(tokio::sync::Semaphore::new(n))
            });
        }
        Roll {
            unit_of,
            units,
            permits,
            halted: Mutex::new(BTreeMap::new()),
        }
    }

    /// Replace one unit: take it out of its Routers, drain, stop, start, wait until it
    /// is healthy (workers) or answers (Routers), put it back.
    pub(super) async fn roll_unit(&self, state: &Shared, roll: &Roll, unit: &Unit) -> StepResult {
        let t = Instant::now();
        let permit = roll.permits[&unit.group].clone();
        let _permit = tokio::select! {
            p = permit.acquire_owned() => p.expect("semaphore open"),
            _ = self.cancel.cancelled() => return Err(StepError::skip("apply was interrupted")),
        };
        if let Some(why) = roll.halted.lock().expect("halt lock").get(&unit.group) {
            return Err(StepError::skip(why));
        }
        let result = self.roll_unit_now(state, unit).await;
        if let Err(e) = &result {
            if !e.skipped {
                let leader = &self.graph.resources[unit.members[0]].address;
                roll.halted.lock().expect("halt lock").insert(
                    unit.group.clone(),
                    format!("the roll of `{}` stopped at `{leader}`", unit.group),
                );
            }
        }
        result.map(|detail| format!("{detail} in {:.1}s", t.elapsed().as_secs_f64()))
    }

    async fn roll_unit_now(&self, state: &Shared, unit: &Unit) -> StepResult {
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
        // 1. Out of every Router, then drained.
        let mut withdrawn: Vec<Withdrawn> = Vec::new();
        for r in resources.iter().filter(|r| r.kind == Kind::Worker) {
            withdrawn.extend(self.withdraw(state, &r.address).await?);
        }
        // A worker that is drift (stopped, unhealthy, exited) serves nothing to drain.
        let serving = resources.iter().all(|r| {
            self.plan.change(&r.address).is_none_or(|c| {
                !c.reasons.iter().any(|x| {
                    matches!(
                        x,
                        crate::plan::Reason::Drift { .. }
                            | crate::plan::Reason::Failed { .. }
                            | crate::plan::Reason::Interrupted
                            | crate::plan::Reason::Tainted
                    )
                })
            })
        });
        if !withdrawn.is_empty() && serving {
            self.drain(&resources[0].address, &urls).await;
        }
        // A Router's members, to give back to its new process.
        let routers: Vec<&str> = resources
            .iter()
            .filter(|r| r.kind == Kind::Router)
            .map(|r| r.address.as_str())
            .collect();
        let members_before: Vec<(String, Vec<(String, String)>)> = {
            let s = state.lock().expect("state mutex");
            s.resources
                .iter()
                .filter(|(_, r)| {
                    r.kind == Kind::Membership
                        && r.spec
                            .get_str("router")
                            .is_some_and(|x| routers.contains(&x.as_str()))
                })
                .map(|(a, r)| (a.clone(), crate::plan::members_of(&r.spec)))
                .collect()
        };
        // 2. The old processes stopped (the replacement binds their ports).
        for r in &resources {
            (self.events)(Event::Started {
                address: r.address.clone(),
                action: "stopping",
            });
        }
        let runtimes: Vec<(String, Option<crate::state::Runtime>)> = {
            let s = state.lock().expect("state mutex");
            resources
                .iter()
                .map(|r| {
                    (
                        r.address.clone(),
                        s.resources.get(&r.address).and_then(|x| x.runtime.clone()),
                    )
                })
                .collect()
        };
        let stops = runtimes.iter().map(|(_, rt)| async move {
            match rt {
                Some(rt) => self.exec.stop(rt).await.map_err(|e| e.to_string()),
                None => Ok(()),
            }
        });
        let stopped = futures::future::join_all(stops).await;
        {
            let mut s = state.lock().expect("state mutex");
            for ((address, _), result) in runtimes.iter().zip(&stopped) {
                if result.is_ok() {
                    if let Some(r) = s.resources.get_mut(address) {
                        // Stopped for replacement: if apply stops here, the next plan
                        // replaces it.
                        r.status = Status::Tainted;
                        r.runtime = None;
                    }
                }
            }
            let mut touched: Vec<String> = runtimes.iter().map(|(a, _)| a.clone()).collect();
            for router in &routers {
                touched.extend(self.router_stopped(&mut s, router));
            }
            let touched: Vec<&str> = touched.iter().map(String::as_str).collect();
            super::append(self.store, self.lock, &mut s, &touched)?;
        }
        if let Some(((address, _), Err(e))) =
            runtimes.iter().zip(&stopped).find(|(_, r)| r.is_err())
        {
            return Err(format!("stopping `{address}`: {e}").into());
        }
        // 3. Started again, in one launch batch.
        let batch: Vec<(usize, Action)> =
            unit.members.iter().map(|&i| (i, Action::Replace)).collect();
        let mut started = Vec::new();
        for (i, result) in self.launch_batch(state, &batch, &mut Vec::new()) {
            match result {
                Ok(st) => started.push((i, st)),
                Err(e) => {
                    return Err(StepError::caused_by(
                        e,
                        self.graph.resources[i].address.clone(),
                    ))
                }
            }
        }
        let mut confirmed = Vec::new();
        for (i, st) in started {
            let address = self.graph.resources[i].address.clone();
            self.confirm_launch(state, i, st)
                .await
                .map_err(|e| StepError::caused_by(e.message, address.clone()))?;
            let rt = state
                .lock()
                .expect("state mutex")
                .resources
                .get(&address)
                .and_then(|r| r.runtime.clone());
            if let Some(rt) = rt {
                confirmed.push((address, rt));
            }
        }
        // 4. Healthy, then back into its Routers.
        if !urls.is_empty() {
            self.wait_healthy(&urls, &confirmed).await?;
            self.put_back(state, &withdrawn).await?;
            return Ok(format!(
                "rolled; {} Router(s) route to it again",
                withdrawn.iter().filter(|w| w.membership.is_some()).count()
            ));
        }
        for (membership, members) in members_before {
            self.give_back(state, &membership, &members).await?;
        }
        Ok("rolled".to_string())
    }

    /// A restarted Router: once it answers, the members it had (still desired) again.
    async fn give_back(
        &self,
        state: &Shared,
        membership: &str,
        members: &[(String, String)],
    ) -> Result<(), StepError> {
        let [frontend, admin_url] = {
            let s = state.lock().expect("state mutex");
            let Some(r) = s.resources.get(membership) else {
                return Ok(());
            };
            r.spec
                .get_strs(["frontend", "admin_url"])
                .map(Option::unwrap_or_default)
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
        self.put_back(state, &withdrawn).await
    }

    /// nginx's configuration changed: rewrite it and reload nginx in place.
    pub(super) async fn reload_in_place(&self, state: &Shared, i: usize) -> StepResult {
        let r = &self.graph.resources[i];
        let Target::Process(p) = r.target else {
            return Err("not a process".into());
        };
        let runtime = state
            .lock()
            .expect("state mutex")
            .resources
            .get(&r.address)
            .and_then(|x| x.runtime.clone())
            .ok_or_else(|| StepError::from(format!("`{}` has no recorded process", r.address)))?;
        self.exec
            .reload(&runtime, &self.launch.processes[p])
            .await
            .map_err(|e| StepError::from(e.to_string()))?;
        let mut s = state.lock().expect("state mutex");
        if let Some(rec) = s.resources.get_mut(&r.address) {
            rec.spec = r.spec.clone();
            rec.hash = r.hash.clone();
            rec.dependencies = r.deps.clone();
        }
        super::append(self.store, self.lock, &mut s, &[r.address.as_str()])?;
        Ok("configuration reloaded".to_string())
    }
}
