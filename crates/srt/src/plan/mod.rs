//! Plans: the desired resource graph diffed against the refreshed state.
//!
//! Every resource gets an action and every change a reason. Replacement cascades only
//! through hashes (a dependency's spec changed, so the dependent's Merkle hash changed);
//! drift, taint or a failed/interrupted launch replaces just that resource. Gates and the
//! smoke check are re-checked on every apply.

pub mod file;
pub mod render;

use crate::graph::{spec, Kind, ResourceGraph, Spec};
use crate::state::{ResourceState, State, Status};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Version of the JSON plan format (`srt plan --json`, saved plan files).
pub const FORMAT_VERSION: u32 = 1;

/// What apply will do to one resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Nothing.
    NoOp,
    /// Start it.
    Create,
    /// Stop it, then start it again (destroy-before-create: ports are reused).
    Replace,
    /// Stop it and forget it.
    Destroy,
    /// Re-run the check (gates, smoke).
    Check,
    /// Change it while it keeps running: a Router's members through its admin API,
    /// nginx's configuration by a reload.
    Update,
}

impl Action {
    /// Terraform-style symbol.
    pub fn symbol(self) -> &'static str {
        match self {
            Action::NoOp => " ",
            Action::Create => "+",
            Action::Replace => "-/+",
            Action::Destroy => "-",
            Action::Check => "<=",
            Action::Update => "~",
        }
    }

    /// JSON `actions` array (a replace is delete then create).
    pub fn steps(self) -> &'static [&'static str] {
        match self {
            Action::NoOp => &["no-op"],
            Action::Create => &["create"],
            Action::Replace => &["delete", "create"],
            Action::Destroy => &["delete"],
            Action::Check => &["read"],
            Action::Update => &["update"],
        }
    }
}

/// Why a resource is replaced or destroyed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Reason {
    /// Its own spec changed in these fields.
    SpecChanged {
        /// Changed top-level fields (`argv`, `env.NAME`, `ports`, ...).
        fields: Vec<String>,
    },
    /// These dependencies' hashes changed.
    DependencyChanged {
        /// Dependency addresses.
        dependencies: Vec<String>,
    },
    /// The recorded process is no longer running (changed outside srt).
    Drift {
        /// What refresh observed.
        detail: String,
    },
    /// Marked tainted.
    Tainted,
    /// The last attempt failed.
    Failed {
        /// The recorded error.
        error: String,
    },
    /// An apply was interrupted while launching it.
    Interrupted,
    /// Requested with `--replace`.
    Requested,
    /// Not in the recipe any more.
    NotInRecipe,
    /// Dependencies changed that a running program cannot take in: it restarts.
    MustRestart {
        /// The dependencies.
        dependencies: Vec<String>,
        /// Why it cannot take them in while running.
        why: String,
    },
    /// An allocation about to end (its time limit): renewed before it does.
    Renew {
        /// What refresh observed (time left, the profile's `renew_before`).
        detail: String,
    },
    /// Its allocation is replaced by one created first: it moves onto it, rolling (and
    /// what it listens on gets that allocation's new hosts).
    MovesWith {
        /// The allocation.
        allocation: String,
    },
    /// A process runs in an allocation's earlier runtime, which that allocation's
    /// replacement deposed: it moves to the current one.
    Moved {
        /// Where it runs.
        from: String,
    },
    /// Workers of a Router's membership stop before the walk and start again elsewhere
    /// (their allocation is replaced): taken out, then added back at their new address.
    Rejoin {
        /// The workers.
        workers: Vec<String>,
    },
    /// An allocation's earlier runtimes wait to be released, once nothing runs in them.
    Deposed {
        /// Their identities (`job 12`).
        runtimes: Vec<String>,
    },
}

impl Reason {
    /// One line for the human plan.
    pub fn describe(&self) -> String {
        match self {
            Reason::SpecChanged { fields } => format!("its spec changed: {}", fields.join(", ")),
            Reason::DependencyChanged { dependencies } => {
                format!("dependencies changed: {}", dependencies.join(", "))
            }
            Reason::Drift { detail } => format!("drift: {detail}"),
            Reason::Tainted => "it is tainted".into(),
            Reason::Failed { error } => format!("its last launch failed: {error}"),
            Reason::Interrupted => "an earlier apply was interrupted while launching it".into(),
            Reason::Requested => "replacement was requested".into(),
            Reason::NotInRecipe => "it is not in the recipe".into(),
            Reason::MustRestart { dependencies, why } => format!(
                "it must restart: {why} (dependencies changed: {})",
                dependencies.join(", ")
            ),
            Reason::Renew { detail } => format!("it is about to end: {detail}"),
            Reason::MovesWith { allocation } => {
                format!("it moves to the new job of `{allocation}`, which replaces the old one")
            }
            Reason::Moved { from } => {
                format!("it runs in {from}, which its allocation's replacement deposed")
            }
            Reason::Rejoin { workers } => format!(
                "its workers {} start again on a new allocation: added back once they serve",
                workers.join(", ")
            ),
            Reason::Deposed { runtimes } => format!(
                "its replaced {} released once nothing runs in {}",
                runtimes.join(", "),
                if runtimes.len() == 1 { "it" } else { "them" }
            ),
        }
    }
}

/// One planned change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// Resource address.
    pub address: String,
    /// Resource kind.
    pub kind: Kind,
    /// Action.
    pub action: Action,
    /// Why (empty for create, no-op and check).
    pub reasons: Vec<Reason>,
    /// Hash before (from state).
    pub before_hash: Option<String>,
    /// Hash after (desired).
    pub after_hash: Option<String>,
    /// Command line before, for a word diff (processes replaced or destroyed only).
    pub before_command: Option<String>,
    /// Command line after (processes created or replaced only).
    pub after_command: Option<String>,
    /// For a membership created or updated: the workers added to and removed from its
    /// Router.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<MemberDiff>,
    /// What this change costs that srt cannot avoid (a worker that registered itself
    /// with its Router stays routed for a while after it stops).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// A replacement created before what it replaces is released (a live allocation:
    /// what runs on it moves over, rolling, then it goes); else it is destroyed first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub create_first: bool,
}

impl Change {
    /// The plan's symbol for it: a replacement created first is `+/-`.
    pub fn symbol(&self) -> &'static str {
        if self.create_first {
            "+/-"
        } else {
            self.action.symbol()
        }
    }

    /// Its JSON `actions`: a replacement created first is a create, then a delete.
    pub fn steps(&self) -> &'static [&'static str] {
        if self.create_first {
            &["create", "delete"]
        } else {
            self.action.steps()
        }
    }
}

/// Workers of a Router as (URL, worker address), sorted.
pub type MemberList = Arc<[(String, String)]>;

/// The workers a membership update adds and removes, as (URL, worker address).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberDiff {
    /// Added to the Router. Shared between the memberships of a plan that add the same
    /// workers (every Router of a deployment gets them all).
    pub added: MemberList,
    /// Taken out of the Router.
    pub removed: Vec<(String, String)>,
}

/// What refresh saw of a resource that needs no change, for the plan's reader (an
/// allocation's job and what is left of its time limit).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    /// Address.
    pub address: String,
    /// What was seen.
    pub detail: String,
}

/// A drifted resource found by refresh.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    /// Address.
    pub address: String,
    /// What was observed.
    pub detail: String,
}

/// A process srt started that no state record tracks, found through its lease file:
/// left by an apply killed after the fork and before it recorded the launch, or still
/// running after its record was removed. Apply and destroy stop it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Orphan {
    /// The resource it was launched for.
    pub address: String,
    /// Its live processes when the plan was made.
    pub pids: Vec<u32>,
    /// How to stop it.
    pub runtime: crate::state::Runtime,
}

/// The plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// JSON format version.
    pub format_version: u32,
    /// Deployment.
    pub deployment: String,
    /// State lineage the plan was made against.
    pub lineage: String,
    /// State serial the plan was made against.
    pub serial: u64,
    /// Hash of the recipe and options it was made from.
    pub recipe_hash: String,
    /// srt version.
    pub srt_version: String,
    /// Drift observed by refresh.
    pub drift: Vec<Drift>,
    /// Changes, desired resources in dependency order, then destroys.
    pub changes: Vec<Change>,
    /// Processes no record tracks, to stop (absent from the JSON when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orphans: Vec<Orphan>,
    /// What refresh saw of the allocations: their jobs and time left (absent from the
    /// JSON when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocations: Vec<Note>,
    /// Whether the live deployment was refreshed before the diff: false for a plan
    /// against the records alone ([`PlanOptions::skip_refresh`]), which cannot show drift
    /// (absent from the JSON when true).
    #[serde(default = "refreshed", skip_serializing_if = "was_refreshed")]
    pub refreshed: bool,
    /// What the deployment declares it runs (the launch plan's `identity`), for the
    /// plan's readers; in no resource's hash (absent when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<serde_json::Value>,
}

/// [`Plan::refreshed`] of a plan file written before the field existed.
fn refreshed() -> bool {
    true
}

/// Whether a plan was refreshed: the usual case, which its JSON does not mention.
fn was_refreshed(refreshed: &bool) -> bool {
    *refreshed
}

/// Counts for the summary line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// To create.
    pub create: usize,
    /// To replace.
    pub replace: usize,
    /// To update in place.
    pub update: usize,
    /// To destroy.
    pub destroy: usize,
    /// Unchanged.
    pub no_op: usize,
    /// Checks.
    pub check: usize,
}

impl Plan {
    /// Counts by action.
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for c in &self.changes {
            match c.action {
                Action::Create => s.create += 1,
                Action::Replace => s.replace += 1,
                Action::Update => s.update += 1,
                Action::Destroy => s.destroy += 1,
                Action::NoOp => s.no_op += 1,
                Action::Check => s.check += 1,
            }
        }
        s
    }

    /// True when apply would start or stop something.
    pub fn has_changes(&self) -> bool {
        let s = self.summary();
        s.create + s.replace + s.update + s.destroy > 0 || !self.orphans.is_empty()
    }

    /// The change for an address.
    pub fn change(&self, address: &str) -> Option<&Change> {
        self.changes.iter().find(|c| c.address == address)
    }
}

/// What refresh saw of a recorded process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    /// Running as recorded.
    Alive,
    /// Gone (with a detail such as "process 123 exited").
    Gone(String),
    /// Running, and due for a replacement before it ends (an allocation near its time
    /// limit), with a detail such as "12m left, renew_before 30m".
    Renew(String),
}

impl Observation {
    /// Whether it runs (as recorded, or due for a renewal).
    pub fn is_alive(&self) -> bool {
        matches!(self, Observation::Alive | Observation::Renew(_))
    }
}

/// Options that change planning.
#[derive(Clone, Debug, Default)]
pub struct PlanOptions {
    /// Addresses to replace even if unchanged.
    pub replace: BTreeSet<String>,
    /// Plan to destroy everything.
    pub destroy: bool,
    /// Plan against the records alone (`--refresh=false`): no process, Router or
    /// `/health` is probed, so nothing that died or changed behind srt's back shows,
    /// and the plan says so ([`Plan::refreshed`]). Leases are still read: what an
    /// interrupted srt started is never left untracked.
    pub skip_refresh: bool,
}

/// The command line of each process spec (on several threads when there are many).
fn command_lines(specs: &[(usize, &Spec)]) -> Vec<Option<String>> {
    let work: Vec<usize> = specs.iter().map(|(_, spec)| spec.as_str().len()).collect();
    crate::parallel::map_slices(&work, |range| {
        let mut scratch = String::new();
        specs[range]
            .iter()
            .map(|(_, spec)| command_of(spec, &mut scratch))
            .collect()
    })
}

/// The command line of a process spec (only its `argv` is read), built in `scratch`
/// (reused across a plan) and copied out at its size.
fn command_of(spec: &Spec, scratch: &mut String) -> Option<String> {
    scratch.clear();
    let mut line = crate::launch::render::CommandLine(std::mem::take(scratch));
    let read = spec.each_arg(|token| line.push(token));
    *scratch = line.0;
    read.map(|()| scratch.as_str().to_owned())
}

/// Top-level fields that differ; `env` is reported per variable. Compared as canonical
/// text (equal values have equal text), and only where the two texts differ
/// ([`spec::differing_fields`]).
fn changed_fields(before: &Spec, after: &Spec) -> Vec<String> {
    let Some(changes) = spec::differing_fields(before.as_str(), after.as_str()) else {
        return if before == after {
            Vec::new()
        } else {
            vec!["spec".into()]
        };
    };
    let mut out = Vec::new();
    for (key, bv, av) in changes {
        if key != "env" {
            out.push(key.into_owned());
            continue;
        }
        match spec::differing_fields(bv.unwrap_or("{}"), av.unwrap_or("{}")) {
            Some(vars) => out.extend(vars.into_iter().map(|(name, ..)| format!("env.{name}"))),
            None => out.push(key.into_owned()),
        }
    }
    out
}

/// Diff the desired graph against state and refresh observations.
pub fn diff(
    graph: &ResourceGraph,
    state: &State,
    observed: &BTreeMap<String, Observation>,
    recipe_hash: &str,
    options: &PlanOptions,
) -> Plan {
    let mut changes = Vec::with_capacity(graph.resources.len());
    // The changes that show a created or replaced process's command line, and its spec:
    // written once every change is known, on several threads when there are many.
    let mut commands: Vec<(usize, &Spec)> = Vec::new();
    // And those that show the command line a process was started with (replaced or
    // destroyed).
    let mut recorded: Vec<(usize, &Spec)> = Vec::new();
    // The members of the last membership created (the text of its list), and what its
    // change adds: the next one with the same list shares it.
    let mut created: Option<(Option<&str>, MemberList)> = None;
    // The member lists (recorded, or none for a restarted Router; desired) of the last
    // membership updated, and its change.
    type Lists<'a> = (Option<Option<&'a str>>, Option<&'a str>);
    let mut updated: Option<(Lists<'_>, MemberDiff)> = None;
    // How many records are of desired resources.
    let mut recorded_desired = 0;
    let mut drift = Vec::new();
    for (address, obs) in observed {
        if let Observation::Gone(detail) = obs {
            drift.push(Drift {
                address: address.clone(),
                detail: detail.clone(),
            });
        }
    }
    if !options.destroy {
        // Replaced resources whose dependents cannot outlive them (the allocation).
        let mut replaced_hosts: BTreeSet<&str> = BTreeSet::new();
        // Those of them destroyed before they are created again (not live), and the
        // processes that stop with them before the walk (they leave their Routers, and
        // come back once started again).
        let mut stopped_hosts: BTreeSet<&str> = BTreeSet::new();
        // Those created first (live): what runs on them moves over, rolling.
        let mut moving_hosts: BTreeSet<&str> = BTreeSet::new();
        // The resources that change only because they move with theirs.
        let mut only_moving: BTreeSet<&str> = BTreeSet::new();
        // The allocation holding each node, by node index.
        let mut holders: Vec<Option<&str>> = Vec::new();
        for r in &graph.resources {
            if let crate::graph::Target::Allocation(k) = r.target {
                for &n in &graph.allocations[k] {
                    if holders.len() <= n {
                        holders.resize(n + 1, None);
                    }
                    holders[n] = Some(r.address.as_str());
                }
            }
        }
        // How a process spec holds a public port (the deployment's public address).
        let public_port = format!("\"{}\":{{", crate::ports::PUBLIC);
        let mut rejoining: BTreeSet<&str> = BTreeSet::new();
        // Each resource's record, looked up once: a changed dependency is looked up by
        // position below (a Router depends on every worker it lists).
        let priors: Vec<Option<&ResourceState>> = graph
            .resources
            .iter()
            .map(|r| state.resources.get(&r.address))
            .collect();
        recorded_desired = priors.iter().flatten().count();
        // Whether each resource's hash differs from its record's (or it has none), by
        // position: a replaced Router asks it of every worker it lists.
        let changed: Vec<bool> = graph
            .resources
            .iter()
            .zip(&priors)
            .map(|(r, p)| p.map(|p| p.hash.as_str()) != Some(r.hash.as_str()))
            .collect();
        let hash_changed = |at: usize| changed[at];
        // The fields that changed in each recorded, non-check resource whose hash changed
        // (what the walk below asks), by position: compared first, on threads when there
        // are many (a role's workers at once).
        let respecified: Vec<usize> = (0..graph.resources.len())
            .filter(|&at| {
                priors[at].is_some() && !graph.resources[at].kind.is_check() && hash_changed(at)
            })
            .collect();
        let work: Vec<usize> = respecified
            .iter()
            .map(|&at| graph.resources[at].spec.as_str().len())
            .collect();
        let compared = crate::parallel::map_slices(&work, |range| {
            respecified[range]
                .iter()
                .map(|&at| {
                    let prior = priors[at].expect("recorded");
                    changed_fields(&prior.spec, &graph.resources[at].spec)
                })
                .collect()
        });
        let mut fields: Vec<Option<Vec<String>>> = vec![None; graph.resources.len()];
        for (at, changed) in respecified.into_iter().zip(compared) {
            fields[at] = Some(changed);
        }
        for (at, r) in graph.resources.iter().enumerate() {
            let prior = priors[at];
            // Command lines are rendered only for what is created or replaced (a plan
            // shows them, a no-op does not), so only those carry them.
            let mut change = Change {
                address: r.address.clone(),
                kind: r.kind,
                action: Action::NoOp,
                reasons: Vec::new(),
                before_hash: prior.map(|p| p.hash.clone()),
                after_hash: Some(r.hash.clone()),
                before_command: None,
                after_command: None,
                members: None,
                note: None,
                create_first: false,
            };
            let Some(prior) = prior else {
                change.action = if r.kind.is_check() {
                    Action::Check
                } else {
                    Action::Create
                };
                if r.kind.is_process() {
                    commands.push((changes.len(), &r.spec));
                }
                if r.kind == Kind::Membership {
                    let text = members_text(&r.spec);
                    let added = match &created {
                        Some((was, added)) if text.is_some() && *was == text => added.clone(),
                        _ => {
                            let added: MemberList = desired_members(&r.spec)
                                .iter()
                                .map(|m| (m.url.to_string(), m.worker.to_string()))
                                .collect();
                            created = Some((text, added.clone()));
                            added
                        }
                    };
                    change.members = Some(MemberDiff {
                        added,
                        removed: Vec::new(),
                    });
                }
                changes.push(change);
                continue;
            };
            if r.kind.is_check() {
                change.action = Action::Check;
                changes.push(change);
                continue;
            }
            let mut reasons = Vec::new();
            if prior.hash != r.hash {
                let fields = fields[at].take().expect("compared above");
                let mut workers_only = true;
                let deps: Vec<String> = r
                    .dependencies()
                    .filter(|&(_, at)| hash_changed(at))
                    .map(|(d, at)| {
                        workers_only &= graph.resources[at].kind == Kind::Worker;
                        d.clone()
                    })
                    .collect();
                let dep_set_changed = prior.dependencies != r.deps;
                if !fields.is_empty() {
                    reasons.push(Reason::SpecChanged { fields });
                }
                if !deps.is_empty() {
                    // A process that cannot take changed workers in while it runs says
                    // so, rather than "dependencies changed".
                    reasons.push(match &r.restart_note {
                        Some(why) if workers_only => Reason::MustRestart {
                            dependencies: deps,
                            why: why.clone(),
                        },
                        _ => Reason::DependencyChanged { dependencies: deps },
                    });
                } else if dep_set_changed || reasons.is_empty() {
                    reasons.push(Reason::SpecChanged {
                        fields: vec!["dependencies".into()],
                    });
                }
            }
            match prior.status {
                Status::Tainted => reasons.push(Reason::Tainted),
                Status::Failed => reasons.push(Reason::Failed {
                    error: prior.error.clone().unwrap_or_default(),
                }),
                Status::Pending => reasons.push(Reason::Interrupted),
                Status::Running => {}
            }
            let gone = match observed.get(&r.address) {
                Some(Observation::Gone(detail)) => {
                    reasons.push(Reason::Drift {
                        detail: detail.clone(),
                    });
                    true
                }
                Some(Observation::Renew(detail)) => {
                    reasons.push(Reason::Renew {
                        detail: detail.clone(),
                    });
                    false
                }
                _ => false,
            };
            if let Some(from) = moved(r, prior, &priors) {
                reasons.push(Reason::Moved { from });
            }
            if !prior.deposed.is_empty() {
                reasons.push(Reason::Deposed {
                    runtimes: prior
                        .deposed
                        .iter()
                        .filter_map(crate::state::Runtime::allocation_id)
                        .collect(),
                });
            }
            if options.replace.contains(&r.address) {
                reasons.push(Reason::Requested);
            }
            let forced: Vec<String> = r
                .deps
                .iter()
                .filter(|d| replaced_hosts.contains(d.as_str()))
                .filter(|d| {
                    !reasons.iter().any(|x| {
                        matches!(x, Reason::DependencyChanged { dependencies } if dependencies.contains(d))
                    })
                })
                .cloned()
                .collect();
            if !forced.is_empty() {
                reasons.push(Reason::DependencyChanged {
                    dependencies: forced,
                });
            }
            // On an allocation replaced by one created first, it moves with it (and so
            // do its dependencies that change for that alone: its port block).
            let own = r.node.and_then(|n| holders.get(n).copied().flatten());
            if let Some(own) = own.filter(|a| moving_hosts.contains(a)) {
                moves_with(&mut reasons, own, &only_moving);
                if reasons.len() == 1 {
                    only_moving.insert(&r.address);
                }
            }
            if r.kind == Kind::Membership {
                let workers: Vec<String> = desired_members(&r.spec)
                    .iter()
                    .filter(|m| rejoining.contains(m.worker.as_ref()))
                    .map(|m| m.worker.to_string())
                    .collect();
                if !workers.is_empty() {
                    reasons.push(Reason::Rejoin { workers });
                }
            }
            let in_place = in_place(r.kind, &reasons);
            if !reasons.is_empty() && !in_place && r.kind.replaces_dependents() {
                replaced_hosts.insert(&r.address);
            }
            if !reasons.is_empty() {
                change.action = if in_place {
                    Action::Update
                } else {
                    Action::Replace
                };
                // A live allocation's replacement comes first: what runs on it moves
                // over, rolling, before it is released.
                change.create_first = change.action == Action::Replace
                    && r.kind == Kind::Allocation
                    && !gone
                    && prior.status == Status::Running
                    && prior
                        .runtime
                        .as_ref()
                        .is_some_and(crate::state::Runtime::doubles);
                if r.kind == Kind::Allocation && change.action == Action::Replace {
                    match change.create_first {
                        true => moving_hosts.insert(&r.address),
                        false => stopped_hosts.insert(&r.address),
                    };
                }

                if r.kind.is_process() && r.deps.iter().any(|d| stopped_hosts.contains(d.as_str()))
                {
                    rejoining.insert(&r.address);
                }
                change.reasons = reasons;
                if r.kind.is_process() {
                    recorded.push((changes.len(), &prior.spec));
                    commands.push((changes.len(), &r.spec));
                }
                change.note = r.leave_note.clone();
                let moves = change
                    .reasons
                    .iter()
                    .any(|x| matches!(x, Reason::MovesWith { .. }));
                if moves && r.kind.is_process() && r.spec.as_str().contains(&public_port) {
                    change.note = Some(
                        "it listens on the deployment's public address, which moves with it to the new job's host: clients must follow".into(),
                    );
                }
                if r.kind == Kind::Membership {
                    // A replaced Router starts with no member: every one is added again.
                    let restarted = change.reasons.iter().any(|x| {
                        matches!(x, Reason::DependencyChanged { dependencies } if dependencies.iter().any(|d| graph.get(d).is_some_and(|g| matches!(g.kind, Kind::Component(_)))))
                    });
                    let before = (!restarted).then_some(&prior.spec);
                    // Every Router lists every worker: the same two lists give the same
                    // change, worked out once.
                    let lists = (before.map(members_text), members_text(&r.spec));
                    let shared = lists.1.is_some() && lists.0.is_none_or(|t| t.is_some());
                    let members = match &updated {
                        Some((was, diff)) if shared && *was == lists => diff.clone(),
                        _ => {
                            let diff = member_diff(before, &r.spec);
                            if shared {
                                updated = Some((lists, diff.clone()));
                            }
                            diff
                        }
                    };
                    change.members = Some(rejoined(members, &r.spec, &rejoining));
                }
            }
            changes.push(change);
        }
    }
    // Destroys: recorded resources not desired, dependents first. None when every record
    // is of a desired resource (the walk found them all; addresses are unique).
    let gone: Vec<&String> = if !options.destroy && recorded_desired == state.resources.len() {
        Vec::new()
    } else {
        state
            .resources
            .keys()
            .filter(|a| options.destroy || graph.get(a).is_none())
            .collect()
    };
    // Workers that registered themselves leave their Router only when the registration
    // expires: said of a removed one too.
    let discovery_note = graph.resources.iter().find_map(|r| r.leave_note.clone());
    for address in destroy_order(state, &gone) {
        let prior = &state.resources[&address];
        if prior.kind.is_process() {
            recorded.push((changes.len(), &prior.spec));
        }
        changes.push(Change {
            address: address.clone(),
            kind: prior.kind,
            action: Action::Destroy,
            reasons: vec![Reason::NotInRecipe],
            before_hash: Some(prior.hash.clone()),
            after_hash: None,
            before_command: None,
            after_command: None,
            members: None,
            note: (prior.kind == Kind::Worker)
                .then(|| discovery_note.clone())
                .flatten(),
            create_first: false,
        });
    }
    for ((at, _), line) in commands.iter().zip(command_lines(&commands)) {
        changes[*at].after_command = line;
    }
    for ((at, _), line) in recorded.iter().zip(command_lines(&recorded)) {
        changes[*at].before_command = line;
    }
    if options.destroy {
        for c in &mut changes {
            c.reasons = Vec::new();
        }
    }
    Plan {
        format_version: FORMAT_VERSION,
        deployment: state.deployment.clone(),
        lineage: state.lineage.clone(),
        serial: state.serial,
        recipe_hash: recipe_hash.to_string(),
        srt_version: env!("CARGO_PKG_VERSION").to_string(),
        drift,
        changes,
        orphans: Vec::new(),
        allocations: Vec::new(),
        refreshed: !options.skip_refresh,
        identity: None,
    }
}

/// Whether a resource with these reasons changes in place: a membership always (its
/// Router's worker list is edited, the Router keeps running); a component that reloads
/// its files (nginx) when only they changed.
/// `reasons` of a resource on allocation `own`, which is replaced by one created first:
/// `own` taken out of the dependencies that changed, and said as a move.
fn moves_with(reasons: &mut Vec<Reason>, own: &str, only_moving: &BTreeSet<&str>) {
    for r in reasons.iter_mut() {
        if let Reason::DependencyChanged { dependencies } = r {
            dependencies.retain(|d| d != own && !only_moving.contains(d.as_str()));
        }
    }
    reasons.retain(
        |r| !matches!(r, Reason::DependencyChanged { dependencies } if dependencies.is_empty()),
    );
    reasons.push(Reason::MovesWith {
        allocation: own.to_string(),
    });
}

/// `members` with the workers of membership `spec` that start again elsewhere
/// (`restarted`) as taken out and added back.
fn rejoined(mut members: MemberDiff, spec: &Spec, restarted: &BTreeSet<&str>) -> MemberDiff {
    let again: Vec<(String, String)> = desired_members(spec)
        .iter()
        .filter(|m| restarted.contains(m.worker.as_ref()))
        .map(|m| (m.url.to_string(), m.worker.to_string()))
        .collect();
    if again.is_empty() {
        return members;
    }
    let mut added: Vec<(String, String)> = members.added.to_vec();
    for m in &again {
        if !added.contains(m) {
            added.push(m.clone());
        }
        if !members.removed.contains(m) {
            members.removed.push(m.clone());
        }
    }
    members.added = added.into();
    members
}

/// Where process `r` runs, when that is a runtime one of its allocations deposed (its
/// replacement was created and the process has not moved yet): it must move.
fn moved(
    r: &crate::graph::Resource,
    prior: &ResourceState,
    priors: &[Option<&ResourceState>],
) -> Option<String> {
    if !r.kind.is_process() {
        return None;
    }
    let inside = prior.runtime.as_ref()?.inside()?;
    r.dependencies()
        .filter_map(|(_, at)| priors[at])
        .filter(|a| a.kind == Kind::Allocation)
        .any(|a| {
            a.deposed
                .iter()
                .any(|d| d.allocation_id().as_deref() == Some(inside.as_str()))
        })
        .then_some(inside)
}

fn in_place(kind: Kind, reasons: &[Reason]) -> bool {
    match kind {
        Kind::Membership => true,
        Kind::Allocation => reasons.iter().all(|r| matches!(r, Reason::Deposed { .. })),
        Kind::Component(c) if c.reloads_files => reasons.iter().all(
            |r| matches!(r, Reason::SpecChanged { fields } if fields.iter().all(|f| f == "files")),
        ),
        _ => false,
    }
}

/// The members of a membership spec, as (URL, worker).
pub fn members_of(spec: &Spec) -> Vec<(String, String)> {
    member_refs(spec)
        .into_iter()
        .map(|m| (m.url.into_owned(), m.worker.into_owned()))
        .collect()
}

/// The text of a membership spec's member list (its keys are sorted, so the list is
/// what lies between `"members":` and the last key, `"router"`; neither can occur
/// unescaped inside a string).
fn members_text(spec: &Spec) -> Option<&str> {
    let text = spec.as_str();
    let start = text.find(",\"members\":[")?;
    let end = text.rfind(",\"router\":")?;
    text.get(start..end)
}

/// One member of a desired membership spec, borrowed from the spec's text.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
struct MemberRef<'a> {
    #[serde(borrow)]
    url: Cow<'a, str>,
    #[serde(borrow)]
    worker: Cow<'a, str>,
}

/// The members of a desired membership spec as (URL, worker), sorted and deduplicated,
/// read straight from its canonical text: a plan creates one membership per Router, each
/// listing every worker.
fn desired_members(spec: &Spec) -> Vec<MemberRef<'_>> {
    let mut members = member_refs(spec);
    members.sort_unstable();
    members.dedup();
    members
}

/// The members of a membership spec as (URL, worker) in their listed order, borrowed
/// from its text.
fn member_refs(spec: &Spec) -> Vec<MemberRef<'_>> {
    #[derive(Deserialize)]
    struct Members<'a> {
        #[serde(borrow, default)]
        members: Vec<MemberRef<'a>>,
    }
    serde_json::from_str::<Members<'_>>(spec.as_str())
        .map(|m| m.members)
        .unwrap_or_default()
}

/// What changes from the members of `before` (none: a Router with no member) to those
/// of `after`. Both lists are read borrowed, sorted, and merged: only what differs is
/// copied.
fn member_diff(before: Option<&Spec>, after: &Spec) -> MemberDiff {
    let was = before.map(desired_members).unwrap_or_default();
    let now = desired_members(after);
    let owned = |m: &&MemberRef<'_>| (m.url.to_string(), m.worker.to_string());
    let (removed, added) = sorted_differences(&was, &now);
    MemberDiff {
        added: added.iter().map(owned).collect(),
        removed: removed.iter().map(owned).collect(),
    }
}

/// What only `a` holds and what only `b` holds, each in order, for two sorted lists
/// without repeats (merged in one pass): a membership's members against its record, or
/// against what its Router lists.
pub(crate) fn sorted_differences<'a, T: Ord>(a: &'a [T], b: &'a [T]) -> (Vec<&'a T>, Vec<&'a T>) {
    let (mut only_a, mut only_b) = (Vec::new(), Vec::new());
    let (mut x, mut y) = (a.iter().peekable(), b.iter().peekable());
    loop {
        match (x.peek(), y.peek()) {
            (None, None) => return (only_a, only_b),
            (Some(p), Some(q)) if p == q => {
                x.next();
                y.next();
            }
            (Some(p), Some(q)) if p < q => only_a.extend(x.next()),
            (Some(_), None) => only_a.extend(x.next()),
            _ => only_b.extend(y.next()),
        }
    }
}

/// Recorded resources in an order where every dependent comes before its dependencies.
pub fn destroy_order(state: &State, addresses: &[&String]) -> Vec<String> {
    let wanted: BTreeSet<&str> = addresses.iter().map(|a| a.as_str()).collect();
    // Kahn over the recorded (direct) dependencies, restricted to `wanted`, reversed.
    let mut indegree: BTreeMap<&str, usize> = wanted.iter().map(|a| (*a, 0)).collect();
    let mut dependents: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for a in &wanted {
        for d in &state.resources[*a].dependencies {
            if wanted.contains(d.as_str()) {
                *indegree.get_mut(a).expect("wanted") += 1;
                dependents.entry(d.as_str()).or_default().push(a);
            }
        }
    }
    let mut ready: Vec<&str> = indegree
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(a, _)| *a)
        .collect();
    ready.reverse();
    let mut order = Vec::with_capacity(wanted.len());
    while let Some(a) = ready.pop() {
        order.push(a.to_string());
        if let Some(ds) = dependents.get(a) {
            for d in ds {
                let n = indegree.get_mut(d).expect("wanted");
                *n -= 1;
                if *n == 0 {
                    ready.push(d);
                }
            }
        }
    }
    // Anything left is in a recorded cycle (should not happen); append it deterministically.
    if order.len() < wanted.len() {
        let placed: BTreeSet<&str> = order.iter().map(String::as_str).collect();
        let left: Vec<String> = wanted
            .iter()
            .filter(|a| !placed.contains(*a))
            .map(std::string::ToString::to_string)
            .collect();
        order.extend(left);
    }
    order.reverse();
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn membership(router: &str, members: &[(&str, &str)]) -> serde_json::Value {
        json!({
            "admin_url": "http://10.0.0.1:8000",
            "frontend": "vllm-router",
            "members": members.iter().map(|(url, worker)| json!({"url": url, "worker": worker})).collect::<Vec<_>>(),
            "router": router,
        })
    }

    #[test]
    fn desired_members_read_as_the_recorded_ones_are() {
        let members = [
            ("http://b:1", "worker.agg[1]"),
            ("http://a:\"1\"", "worker.agg[0]"),
            ("http://b:1", "worker.agg[1]"),
        ];
        let spec = membership("router[0]", &members);
        let read: Vec<(String, String)> = desired_members(&Spec::of(&spec))
            .into_iter()
            .map(|m| (m.url.into_owned(), m.worker.into_owned()))
            .collect();
        let recorded: Vec<(String, String)> = members_of(&Spec::of(&spec))
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(read, recorded);
        assert_eq!(read.len(), 2);
        // The list's text is the same under any Router, and only the list.
        let tricky = [("http://r:1/,\"router\":", "worker.agg[0]")];
        let a = Spec::of(&membership("router[0]", &tricky));
        let b = Spec::of(&membership("router[1]", &tricky));
        assert_eq!(members_text(&a), members_text(&b));
        assert!(members_text(&a)
            .unwrap()
            .ends_with("\"worker\":\"worker.agg[0]\"}]"));
        assert_ne!(members_text(&a), members_text(&Spec::of(&spec)));
    }

    #[test]
    fn a_member_change_is_what_each_list_has_that_the_other_lacks() {
        let m = |i: usize| (format!("http://h:{}", i % 7), format!("worker.agg[{i}]"));
        let spec = |ids: &[usize]| {
            let pairs: Vec<(String, String)> = ids.iter().map(|&i| m(i)).collect();
            let refs: Vec<(&str, &str)> = pairs.iter().map(|(u, w)| (&**u, &**w)).collect();
            Spec::of(&membership("router[0]", &refs))
        };
        let (was, now) = (spec(&[9, 1, 2, 3, 5, 5, 8]), spec(&[4, 2, 3, 8, 0, 11, 4]));
        let set = |s: &Spec| members_of(s).into_iter().collect::<BTreeSet<_>>();
        let (a, b) = (set(&was), set(&now));
        let diff = member_diff(Some(&was), &now);
        assert_eq!(*diff.added, b.difference(&a).cloned().collect::<Vec<_>>());
        assert_eq!(diff.removed, a.difference(&b).cloned().collect::<Vec<_>>());
        assert_eq!((diff.added.len(), diff.removed.len()), (3, 3));
        // A restarted Router (no recorded list) gets every member.
        let fresh = member_diff(None, &now);
        assert_eq!(*fresh.added, b.into_iter().collect::<Vec<_>>());
        assert!(fresh.removed.is_empty());
    }

    #[test]
    fn routers_with_the_same_workers_each_name_the_changed_ones() {
        use crate::launch::{LaunchProcess, ProcessKind};
        // Three workers with these ports; Routers 0, 1 and 3 list every worker, Router 2
        // only the first two.
        let lowered = |ports: [&str; 3]| {
            let mut launch = crate::launch::LaunchPlan::empty("t");
            for (i, port) in ports.into_iter().enumerate() {
                launch.processes.push(LaunchProcess::bare(
                    &format!("worker.agg[{i}].node[0]"),
                    ProcessKind::Worker,
                    ["vllm", "serve", "--port", port].into(),
                ));
            }
            for (r, n) in [(0, 3), (1, 3), (2, 2), (3, 3)] {
                let mut router = LaunchProcess::bare(
                    &format!("router[{r}]"),
                    ProcessKind::Component(&crate::frontend::ROUTER),
                    ["vllm-router"].into(),
                );
                router.depends_on = (0..n).map(|i| format!("worker.agg[{i}].node[0]")).collect();
                launch.processes.push(router);
            }
            crate::graph::lower(&launch, &serde_json::Value::Null).unwrap()
        };
        let mut state = State::new("t");
        for r in &lowered(["1", "1", "1"]).resources {
            let record = ResourceState::of(r, Status::Running);
            state.resources.insert(r.address.clone(), record);
        }
        let plan = diff(
            &lowered(["1", "2", "2"]),
            &state,
            &BTreeMap::new(),
            "h",
            &PlanOptions::default(),
        );
        let w = |i: usize| format!("worker.agg[{i}].node[0]");
        for (r, changed) in [
            (0, vec![w(1), w(2)]),
            (1, vec![w(1), w(2)]),
            (2, vec![w(1)]),
            (3, vec![w(1), w(2)]),
        ] {
            let c = plan.change(&format!("router[{r}]")).unwrap();
            assert_eq!(c.action, Action::Replace);
            assert_eq!(
                c.reasons,
                [Reason::DependencyChanged {
                    dependencies: changed
                }],
                "router[{r}]"
            );
        }
    }

    /// The graph of `launch` and its plan against an empty state.
    fn from_scratch(launch: &crate::launch::LaunchPlan) -> (ResourceGraph, Plan) {
        let graph = crate::graph::lower(launch, &serde_json::Value::Null).unwrap();
        let plan = diff(
            &graph,
            &State::new("t"),
            &BTreeMap::new(),
            "h",
            &PlanOptions::default(),
        );
        (graph, plan)
    }

    #[test]
    fn a_large_plan_shows_each_created_process_its_own_command() {
        use crate::launch::{LaunchProcess, ProcessKind};
        let mut launch = crate::launch::LaunchPlan::empty("t");
        // Enough processes for the command lines to be written on several threads.
        launch.processes = (0..crate::parallel::FROM + 5)
            .map(|i| {
                LaunchProcess::bare(
                    &format!("worker.agg[{i}].node[0]"),
                    ProcessKind::Worker,
                    ["vllm", "serve", "--port", &i.to_string(), "--x", "a b"].into(),
                )
            })
            .collect();
        let (graph, plan) = from_scratch(&launch);
        // `worker.agg[i].node[0]` -> i
        let index_of = |address: &str| -> usize {
            let rest = &address["worker.agg[".len()..];
            rest[..rest.find(']').unwrap()].parse().unwrap()
        };
        let mut shown = 0;
        for c in plan.changes.iter().filter(|c| c.kind == Kind::Worker) {
            let i = index_of(&c.address);
            let expected = format!("vllm serve --port {i} --x 'a b'");
            assert_eq!(c.after_command.as_deref(), Some(expected.as_str()));
            shown += 1;
        }
        assert_eq!(shown, launch.processes.len());

        // Recorded, then every other process changes one argument, and every third one
        // the env (the changed fields are compared on threads too).
        let mut state = State::new("t");
        for r in &graph.resources {
            let record = ResourceState::of(r, Status::Running);
            state.resources.insert(r.address.clone(), record);
        }
        for (i, p) in launch.processes.iter_mut().enumerate() {
            if i.is_multiple_of(2) {
                p.argv = ["vllm", "serve", "--port", &i.to_string(), "--x", "c"].into();
            }
            if i.is_multiple_of(3) {
                p.env.insert("A".into(), "1".into());
            }
        }
        let graph = crate::graph::lower(&launch, &serde_json::Value::Null).unwrap();
        let plan = diff(
            &graph,
            &state,
            &BTreeMap::new(),
            "h",
            &PlanOptions::default(),
        );
        for c in plan.changes.iter().filter(|c| c.kind == Kind::Worker) {
            let i = index_of(&c.address);
            let mut fields: Vec<String> = Vec::new();
            if i.is_multiple_of(2) {
                fields.push("argv".into());
            }
            if i.is_multiple_of(3) {
                fields.push("env.A".into());
            }
            let reasons = if fields.is_empty() {
                Vec::new()
            } else {
                vec![Reason::SpecChanged { fields }]
            };
            assert_eq!(c.reasons, reasons, "{}", c.address);
            if i.is_multiple_of(2) {
                let before = format!("vllm serve --port {i} --x 'a b'");
                let after = format!("vllm serve --port {i} --x c");
                assert_eq!(c.before_command.as_deref(), Some(before.as_str()));
                assert_eq!(c.after_command.as_deref(), Some(after.as_str()));
            }
        }
    }

    #[test]
    fn created_memberships_with_the_same_members_share_what_they_add() {
        use crate::launch::{LaunchProcess, Member, Membership, MembershipMode, ProcessKind};
        let process = |address: &str, kind| LaunchProcess::bare(address, kind, ["prog"].into());
        let all: Arc<[Member]> = ["worker.agg[1]", "worker.agg[0]"]
            .iter()
            .map(|w| Member {
                worker: w.to_string(),
                url: format!("http://{w}:8000"),
                role: crate::recipe::RoleKind::Agg,
                kv_connector: None,
                bootstrap_port: None,
            })
            .collect();
        let mut launch = crate::launch::LaunchPlan::empty("t");
        launch.processes = vec![
            process("worker.agg[0]", ProcessKind::Worker),
            process("worker.agg[1]", ProcessKind::Worker),
        ];
        for (i, members) in [all.clone(), all.clone(), all[..1].into()]
            .into_iter()
            .enumerate()
        {
            let router = format!("router[{i}]");
            launch.processes.push(process(
                &router,
                ProcessKind::Component(&crate::frontend::ROUTER),
            ));
            launch.memberships.push(Membership {
                address: format!("members.{router}"),
                router,
                admin_url: "http://r:8000".into(),
                mode: MembershipMode::Managed,
                note: None,
                members,
            });
        }
        let (_, plan) = from_scratch(&launch);
        let added: Vec<&MemberList> = plan
            .changes
            .iter()
            .filter_map(|c| Some(&c.members.as_ref()?.added))
            .collect();
        assert_eq!(added.len(), 3);
        assert!(Arc::ptr_eq(added[0], added[1]));
        // Sorted by URL, as the plan lists them.
        let url = |w: &str| format!("http://{w}:8000");
        assert_eq!(
            &added[0][..],
            &[
                (url("worker.agg[0]"), "worker.agg[0]".to_string()),
                (url("worker.agg[1]"), "worker.agg[1]".to_string())
            ]
        );
        assert_eq!(
            &added[2][..],
            &[(url("worker.agg[1]"), "worker.agg[1]".to_string())]
        );
    }
}
