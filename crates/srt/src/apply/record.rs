//! The recorder: the one owner of apply's state mutex and of the state journal.
//!
//! Every change apply makes to the state goes through a named method here that locks
//! the state once, changes the records it is about and journals exactly those (one
//! append, `StateStore::append`), so what is in memory and what is on disk cannot drift
//! apart at a forgotten call. Two exceptions, both named: check results (port blocks,
//! gates) are kept in memory only ([`Recorder::checked`]) and journaled with the next
//! launch; a process that died under a gate is recorded with a whole save
//! ([`Recorder::died`]), which writes those check results too.

use super::members::record_members;
use super::Shared;
use crate::exec::Started;
use crate::graph::{Kind, ResourceGraph};
use crate::plan::members_of;
use crate::state::{ResourceState, Runtime, State, StateError, StateLock, StateStore, Status};

/// The state shared with the signal handler, the store it is journaled to, and the
/// lock this apply holds.
pub(super) struct Recorder<'a> {
    state: &'a Shared,
    store: &'a StateStore,
    lock: &'a StateLock,
    /// The desired graph: a membership record's hash is the desired one only when its
    /// members are.
    graph: &'a ResourceGraph,
}

/// A finished stop of phase 1, as it is recorded.
pub(super) struct Stopped<'s> {
    pub address: &'s str,
    /// Destroyed (its record goes), not stopped for a replacement (tainted).
    pub destroyed: bool,
    /// A Router: its managed memberships have no member any more.
    pub router: bool,
}

/// Which append of a launch batch failed.
pub(super) enum Unrecorded {
    /// The intents: nothing was started.
    Intents(String),
    /// The identities: the processes were started.
    Identities(String),
}

impl<'a> Recorder<'a> {
    pub(super) fn new(
        state: &'a Shared,
        store: &'a StateStore,
        lock: &'a StateLock,
        graph: &'a ResourceGraph,
    ) -> Recorder<'a> {
        Recorder {
            state,
            store,
            lock,
            graph,
        }
    }

    /// Journal the current records of `addresses` (an append: its cost is those
    /// records, not the whole state).
    fn journal(&self, s: &mut State, addresses: &[&str]) -> Result<(), String> {
        self.store
            .append(self.lock, s, addresses)
            .map_err(|e| format!("saving state: {e}"))
    }

    /// Read the state.
    pub(super) fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.state.lock().expect("state mutex"))
    }

    /// The runtime recorded at `address`.
    pub(super) fn runtime(&self, address: &str) -> Option<Runtime> {
        self.read(|s| s.resources.get(address).and_then(|r| r.runtime.clone()))
    }

    /// Change the state, and journal `address`.
    pub(super) fn record(&self, address: &str, f: impl FnOnce(&mut State)) -> Result<(), String> {
        let mut s = self.state.lock().expect("state mutex");
        f(&mut s);
        self.journal(&mut s, &[address])
    }

    /// Change the record at `address` (if there is one), and journal it.
    pub(super) fn update(
        &self,
        address: &str,
        f: impl FnOnce(&mut ResourceState),
    ) -> Result<(), String> {
        self.record(address, |s| {
            if let Some(r) = s.resources.get_mut(address) {
                f(r);
            }
        })
    }

    /// A new record at `address`, journaled.
    pub(super) fn created(&self, address: &str, record: ResourceState) -> Result<(), String> {
        self.record(address, |s| {
            s.resources.insert(address.to_string(), record);
        })
    }

    /// A new record at `address` unless there is one: journaled only when it is new.
    pub(super) fn created_if_new(
        &self,
        address: &str,
        record: impl FnOnce() -> ResourceState,
    ) -> Result<(), String> {
        let mut s = self.state.lock().expect("state mutex");
        if s.resources.contains_key(address) {
            return Ok(());
        }
        s.resources.insert(address.to_string(), record());
        self.journal(&mut s, &[address])
    }

    /// A check result (port block, gate), kept in memory: journaled with the next
    /// launch or the final save (a lost one only costs a re-check).
    pub(super) fn checked(&self, address: &str, record: ResourceState) {
        let mut s = self.state.lock().expect("state mutex");
        s.resources.insert(address.to_string(), record);
    }

    /// The resource at `address` failed with `error`.
    pub(super) fn failed(&self, address: &str, error: &str) -> Result<(), String> {
        self.update(address, |r| {
            r.status = Status::Failed;
            r.error = Some(error.to_string());
        })
    }

    /// The process at `address` went down after it rolled: failed, if it still runs
    /// `runtime` (any, when not known).
    pub(super) fn went_down(
        &self,
        address: &str,
        runtime: Option<&Runtime>,
        error: &str,
    ) -> Result<(), String> {
        self.record(address, |s| {
            if let Some(r) = s
                .resources
                .get_mut(address)
                .filter(|r| runtime.is_none() || r.runtime.as_ref() == runtime)
            {
                r.status = Status::Failed;
                r.error = Some(error.to_string());
            }
        })
    }

    /// The process at `address`, running `runtime`, died while a gate waited: failed,
    /// recorded with a whole save (with the check results still in memory).
    pub(super) fn died(
        &self,
        address: &str,
        runtime: &Runtime,
        error: String,
    ) -> Result<(), StateError> {
        let mut s = self.state.lock().expect("state mutex");
        if let Some(r) = s
            .resources
            .get_mut(address)
            .filter(|r| r.runtime.as_ref() == Some(runtime))
        {
            r.status = Status::Failed;
            r.error = Some(error);
        }
        self.store.save(self.lock, &mut s).map(|_| ())
    }

    /// The members the membership at `address` has now, changed by `f`: its hash is
    /// the desired one when they are exactly the desired members, else stale.
    pub(super) fn members(
        &self,
        address: &str,
        f: impl FnOnce(&mut Vec<(String, String)>),
    ) -> Result<(), String> {
        self.update(address, |r| {
            let mut now = members_of(&r.spec);
            f(&mut now);
            record_members(self.graph, r, address, &now);
        })
    }

    /// Stops of phase 1 that finished together, recorded with one append: a destroyed
    /// resource's record goes, a replaced one is tainted (if apply stops here, the next
    /// plan replaces it), a Router's managed memberships are emptied.
    pub(super) fn stopped(&self, stops: &[Stopped<'_>]) -> Result<(), StateError> {
        let mut s = self.state.lock().expect("state mutex");
        let mut emptied = Vec::new();
        for stop in stops {
            if stop.router {
                emptied.extend(self.router_stopped(&mut s, stop.address));
            }
            if stop.destroyed {
                s.resources.remove(stop.address);
            } else if let Some(r) = s.resources.get_mut(stop.address) {
                r.status = Status::Tainted;
                r.runtime = None;
            }
        }
        let mut addresses: Vec<&str> = stops.iter().map(|x| x.address).collect();
        addresses.extend(emptied.iter().map(String::as_str));
        self.store.append(self.lock, &mut s, &addresses)
    }

    /// A rolling unit's processes `unit` stopped for their replacement, those at
    /// `stopped` successfully: tainted (if apply stops here, the next plan replaces
    /// them), and the managed memberships of its Routers `routers` emptied. The whole
    /// unit is journaled.
    pub(super) fn tainted(
        &self,
        unit: &[&str],
        stopped: &[&str],
        routers: &[&str],
    ) -> Result<(), String> {
        let mut s = self.state.lock().expect("state mutex");
        for address in stopped {
            if let Some(r) = s.resources.get_mut(*address) {
                r.status = Status::Tainted;
                r.runtime = None;
            }
        }
        let mut touched: Vec<String> = unit.iter().map(|a| (*a).to_string()).collect();
        for router in routers {
            touched.extend(self.router_stopped(&mut s, router));
        }
        let touched: Vec<&str> = touched.iter().map(String::as_str).collect();
        self.journal(&mut s, &touched)
    }

    /// Processes launched together, all under one hold of the mutex: their `pending`
    /// `records` are journaled (with the check results `checks` that came before them)
    /// before the first `start`s, their identities (or start errors) once after the
    /// last. `start(k)` starts the `k`th; `None` when it is nothing to start (its record
    /// stays pending).
    pub(super) fn launched(
        &self,
        records: Vec<(String, ResourceState)>,
        checks: &[&str],
        mut start: impl FnMut(usize) -> Option<Result<Started, String>>,
    ) -> Result<Vec<Option<Result<Started, String>>>, Unrecorded> {
        let addresses: Vec<String> = records.iter().map(|(a, _)| a.clone()).collect();
        let launched: Vec<&str> = addresses.iter().map(String::as_str).collect();
        let mut s = self.state.lock().expect("state mutex");
        for (address, record) in records {
            s.resources.insert(address, record);
        }
        let intents: Vec<&str> = checks.iter().chain(&launched).copied().collect();
        self.journal(&mut s, &intents)
            .map_err(Unrecorded::Intents)?;
        let mut results = Vec::with_capacity(launched.len());
        for (k, address) in launched.iter().enumerate() {
            let result = start(k);
            if let Some(result) = &result {
                let rec = s.resources.get_mut(*address).expect("just inserted");
                match result {
                    Ok(st) => {
                        rec.status = Status::Running;
                        rec.runtime = Some(st.runtime.clone());
                        rec.log_path = Some(st.log_path.clone());
                    }
                    Err(e) => {
                        rec.status = Status::Failed;
                        rec.error = Some(e.clone());
                    }
                }
            }
            results.push(result);
        }
        self.journal(&mut s, &launched)
            .map_err(Unrecorded::Identities)?;
        Ok(results)
    }

    /// The whole state, saved (the journal dropped).
    pub(super) fn save(&self) -> Result<(), StateError> {
        let mut s = self.state.lock().expect("state mutex");
        self.store.save(self.lock, &mut s).map(|_| ())
    }

    /// A Router stopped: the managed memberships of it have no member any more. Their
    /// addresses.
    fn router_stopped(&self, s: &mut State, router: &str) -> Vec<String> {
        let addresses: Vec<String> = s
            .resources
            .iter()
            .filter(|(_, r)| {
                r.kind == Kind::Membership && r.spec.get_str("router").as_deref() == Some(router)
            })
            .map(|(a, _)| a.clone())
            .collect();
        for address in &addresses {
            if let Some(r) = s.resources.get_mut(address) {
                record_members(self.graph, r, address, &[]);
            }
        }
        addresses
    }
}
