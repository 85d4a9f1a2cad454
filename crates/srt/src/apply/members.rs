//! Router membership: which workers each Router routes to, changed through its admin
//! API while it runs ([`crate::frontend::Admin`]).
//!
//! A managed membership's state record holds the members its Router has *now*: apply
//! edits the record with every worker it takes out or puts back, so an interrupted
//! apply leaves a record the next plan diffs correctly. The record's hash is the desired
//! one only while its members are exactly the desired ones; otherwise it is empty
//! (stale), and the next plan updates the membership.

use super::record::Recorder;
use super::{Apply, Event, StepError, StepResult};
use crate::frontend::{Admin, AdminError};
use crate::graph::{Kind, ResourceGraph, Target};
use crate::launch::{MembershipMode, Probe};
use crate::plan::members_of;
use crate::state::{ResourceState, Status};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// How often a worker's `/health` is polled before it is added to its Routers.
const HEALTH_POLL: Duration = Duration::from_millis(10);
/// How often a draining worker's requests are counted.
const DRAIN_POLL: Duration = Duration::from_millis(50);
/// A request to a Router's admin API or a worker's `/health` gives up after this long.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The HTTP client for admin calls and worker probes.
pub(super) fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(ADMIN_TIMEOUT)
        .connect_timeout(Duration::from_secs(2))
        .no_proxy()
        .build()
        .expect("http client")
}

/// A worker taken out of a Router, to put back once its replacement is healthy.
#[derive(Clone, Debug)]
pub(super) struct Withdrawn {
    /// The managed membership record it was taken out of (`None`: a Router that lists it
    /// on its command line, which cannot take it back).
    pub membership: Option<String>,
    /// The worker's address.
    pub worker: String,
    /// Its URL as the Router knows it.
    pub url: String,
}

/// Where a Router's admin API answers, and which one it is.
struct RouterApi {
    admin: &'static dyn Admin,
    url: String,
}

/// A failed admin call to the Router at `router` (its address) of `deployment`, while
/// doing `doing`: one that got no answer names the Router, the call, and what to check.
fn router_failure(deployment: &str, router: &str, doing: &str, e: AdminError) -> StepError {
    let AdminError::Transport {
        operation,
        router: url,
        timed_out,
        detail,
    } = e
    else {
        return format!("{doing}: {e}").into();
    };
    let logs = format!("`srt logs {deployment} '{router}'`");
    if timed_out {
        StepError::with_help(
            format!(
                "{doing}: the Router `{router}` ({url}) did not answer `{operation}` within {}s: timed out",
                ADMIN_TIMEOUT.as_secs()
            ),
            format!(
                "a Router that takes connections but never answers is stopped (SIGSTOP, a debugger) or hung: check that its process runs and is not stopped (`srt status {deployment}`; `ps -o stat` shows `T` for a stopped one) and read its log ({logs}); then apply again"
            ),
        )
    } else {
        StepError::with_help(
            format!("{doing}: cannot reach the Router `{router}` ({url}) for `{operation}`: {detail}"),
            format!(
                "check that its process runs (`srt status {deployment}`) and read its log ({logs}); then apply again"
            ),
        )
    }
}

/// Record `members` as what the membership at `address` has now: its hash is the
/// desired one when they are exactly the desired members, else stale.
pub(super) fn record_members(
    graph: &ResourceGraph,
    record: &mut ResourceState,
    address: &str,
    members: &[(String, String)],
) {
    let list: Vec<serde_json::Value> = members
        .iter()
        .map(|(url, worker)| serde_json::json!({ "url": url, "worker": worker }))
        .collect();
    let mut spec = record.spec.value();
    spec["members"] = serde_json::Value::Array(list);
    record.spec = crate::graph::Spec::of(&spec);
    let desired = graph.get(address);
    record.hash = match desired {
        Some(d) if d.spec == record.spec => d.hash.clone(),
        _ => String::new(),
    };
}

/// The desired member `worker` of `membership`: what its Router is told of it.
fn member<'m>(
    membership: &'m crate::launch::Membership,
    worker: &str,
) -> Result<&'m crate::launch::Member, StepError> {
    membership
        .members
        .iter()
        .find(|m| m.worker == worker)
        .ok_or_else(|| format!("`{worker}` is not a member of `{}`", membership.address).into())
}

impl Apply<'_> {
    fn router_api(&self, frontend: &str, admin_url: &str) -> Option<RouterApi> {
        let admin = crate::frontend::lookup(frontend)?.admin()?;
        Some(RouterApi {
            admin,
            url: self.exec.bindings().resolve(admin_url),
        })
    }

    /// Take the worker at `worker` out of every Router that routes to it: the managed
    /// memberships whose records list it, and the Routers that list it on their command
    /// line (the launch plan's static memberships). Requests in flight on it finish; no
    /// new one reaches it. A Router that does not answer routes nothing, so it is
    /// skipped; one that refuses is an error (the worker must not stop while routed).
    pub(super) async fn withdraw(
        &self,
        rec: &Recorder<'_>,
        worker: &str,
    ) -> Result<Vec<Withdrawn>, StepError> {
        let http = http();
        // (membership record, frontend, admin URL, Router address, the worker's URL)
        let mut targets: Vec<(Option<String>, String, String, String, String)> = Vec::new();
        // A Router this apply stops routes to nothing afterwards: no need to ask it.
        let stopping: BTreeSet<&str> = self
            .plan
            .changes
            .iter()
            .filter(|c| {
                matches!(c.kind, Kind::Component(_))
                    && matches!(
                        c.action,
                        crate::plan::Action::Destroy | crate::plan::Action::Replace
                    )
            })
            .map(|c| c.address.as_str())
            .collect();
        rec.read(|s| {
            for (address, r) in &s.resources {
                if r.kind != Kind::Membership {
                    continue;
                }
                if r.spec
                    .get_str("router")
                    .is_some_and(|x| stopping.contains(x.as_str()))
                {
                    continue;
                }
                for (url, w) in members_of(&r.spec) {
                    if w == worker {
                        let [frontend, admin_url, router] = r
                            .spec
                            .get_strs(["frontend", "admin_url", "router"])
                            .map(Option::unwrap_or_default);
                        targets.push((Some(address.clone()), frontend, admin_url, router, url));
                    }
                }
            }
        });
        for m in &self.launch.memberships {
            if m.mode != MembershipMode::Static {
                continue;
            }
            // Listed on a Router's command line: taken out before it stops, even when
            // that Router restarts afterwards (it routes meanwhile).
            for member in m.members.iter().filter(|x| x.worker == worker) {
                targets.push((
                    None,
                    self.launch.frontend.clone(),
                    m.admin_url.clone(),
                    m.router.clone(),
                    member.url.clone(),
                ));
            }
        }
        let mut out = Vec::new();
        // Its URL as it was started (in a job its allocation may have replaced since).
        let bindings = self.exec.bindings_for(rec.runtime(worker).as_ref());
        for (membership, frontend, admin_url, router, url) in targets {
            let Some(api) = self.router_api(&frontend, &admin_url) else {
                continue;
            };
            let resolved = bindings.resolve(&url);
            if !api.admin.live(&http, &api.url).await {
                continue;
            }
            if let Err(e) = api.admin.remove(&http, &api.url, &resolved).await {
                // A Router that stopped meanwhile routes nothing.
                if api.admin.live(&http, &api.url).await {
                    let doing = format!("taking `{worker}` out of its Router");
                    return Err(router_failure(&self.launch.deployment, &router, &doing, e));
                }
            }
            if let Some(address) = &membership {
                rec.members(address, |left| {
                    left.retain(|(u, w)| !(u == &url && w == worker));
                })?;
            }
            out.push(Withdrawn {
                membership,
                worker: worker.to_string(),
                url,
            });
        }
        Ok(out)
    }

    /// Wait until the workers at `urls` have no request left (running or queued), at
    /// most `rollout.drain_seconds`. Unknown counts (an engine that cannot tell) wait
    /// the whole time only if nothing else is known; the wait never fails. `runtime`
    /// is the worker's record's: its URLs resolve as it was started.
    pub(super) async fn drain(
        &self,
        worker: &str,
        urls: &[String],
        runtime: Option<&crate::state::Runtime>,
    ) {
        let limit = Duration::from_secs(self.launch.rollout.drain_seconds);
        let Some(engine) = crate::engine::lookup(&self.launch.engine) else {
            return;
        };
        if urls.is_empty() || limit.is_zero() {
            return;
        }
        // A worker that cannot say within a second is not serving: nothing to wait for.
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(1))
            .no_proxy()
            .build()
            .expect("http client");
        let start = Instant::now();
        let mut reported = Instant::now();
        let bindings = self.exec.bindings_for(runtime);
        loop {
            let mut left = 0;
            for url in urls {
                let url = bindings.resolve(url);
                left += engine.in_flight(&http, &url).await.unwrap_or(0);
            }
            if left == 0 || start.elapsed() >= limit {
                return;
            }
            if reported.elapsed() >= Duration::from_secs(5) {
                (self.events)(Event::Waiting {
                    address: worker.to_string(),
                    detail: format!("{left} request(s) to finish before it stops"),
                });
                reported = Instant::now();
            }
            tokio::select! {
                _ = tokio::time::sleep(DRAIN_POLL) => {}
                _ = self.cancel.cancelled() => return,
            }
        }
    }

    /// Put withdrawn workers back into their managed memberships' Routers (they are
    /// healthy); those a Router lists on its command line come back with its restart.
    pub(super) async fn put_back(
        &self,
        rec: &Recorder<'_>,
        withdrawn: &[Withdrawn],
    ) -> Result<(), StepError> {
        let http = http();
        for w in withdrawn {
            let Some(address) = &w.membership else {
                continue;
            };
            // Only into a membership that still wants it.
            let desired = self
                .graph
                .get(address)
                .map(|g| members_of(&g.spec))
                .unwrap_or_default();
            if !desired.iter().any(|(u, x)| u == &w.url && x == &w.worker) {
                continue;
            }
            let Some([frontend, admin_url, router]) = rec.read(|s| {
                let r = s.resources.get(address)?;
                Some(
                    r.spec
                        .get_strs(["frontend", "admin_url", "router"])
                        .map(Option::unwrap_or_default),
                )
            }) else {
                continue;
            };
            let Some(api) = self.router_api(&frontend, &admin_url) else {
                continue;
            };
            let Some(membership) = self
                .launch
                .memberships
                .iter()
                .find(|m| &m.address == address)
            else {
                continue;
            };
            let url = self.exec.bindings().resolve(&w.url);
            let registration = member(membership, &w.worker)?.registration(&url);
            api.admin
                .add(&http, &api.url, registration)
                .await
                .map_err(|e| {
                    let doing = format!("putting `{}` back into its Router", w.worker);
                    router_failure(&self.launch.deployment, &router, &doing, e)
                })?;
            rec.members(address, |now| {
                if !now.iter().any(|(u, x)| u == &w.url && x == &w.worker) {
                    now.push((w.url.clone(), w.worker.clone()));
                }
                // In the desired order, so a complete set records the desired hash.
                now.sort_by_key(|m| desired.iter().position(|o| o == m).unwrap_or(usize::MAX));
            })?;
        }
        Ok(())
    }

    /// Wait until every URL answers `/health` with 2xx, failing early when one of
    /// `processes` (address, runtime) dies; bounded by the health budget.
    pub(super) async fn wait_healthy(
        &self,
        urls: &[String],
        processes: &[(String, crate::state::Runtime)],
    ) -> Result<(), StepError> {
        let probes: Vec<Probe> = urls
            .iter()
            .map(|u| Probe::Http {
                urls: vec![u.clone()],
                path: "/health".into(),
            })
            .collect();
        self.wait_serving(&probes, processes).await
    }

    /// Wait until every probe passes (a worker's own health probe), failing early when
    /// one of `processes` (address, runtime) dies; bounded by the health budget.
    pub(super) async fn wait_serving(
        &self,
        probes: &[Probe],
        processes: &[(String, crate::state::Runtime)],
    ) -> Result<(), StepError> {
        let client = http();
        let deadline = Instant::now() + Duration::from_secs(self.health.timeout_secs);
        let mut last_liveness = Instant::now();
        let bindings = self.exec.bindings();
        let resolve = |s: &str| bindings.resolve(s);
        let mut pending: Vec<&Probe> = probes.iter().collect();
        loop {
            let mut still = Vec::new();
            for probe in pending {
                if crate::probe::once(&client, probe, &resolve).await.is_err() {
                    still.push(probe);
                }
            }
            pending = still;
            if pending.is_empty() {
                return Ok(());
            }
            if last_liveness.elapsed() >= Duration::from_millis(500) {
                last_liveness = Instant::now();
                for (address, rt) in processes {
                    if let crate::plan::Observation::Gone(detail) = self.exec.observe(rt).await {
                        return Err(StepError::caused_by(
                            format!("`{address}` died before it was healthy: {detail}"),
                            address.clone(),
                        ));
                    }
                }
            }
            if Instant::now() >= deadline {
                let waited: Vec<String> = pending.iter().map(|p| awaited(p, &resolve)).collect();
                return Err(format!(
                    "timed out after {}s waiting for {}",
                    self.health.timeout_secs,
                    waited.join(", ")
                )
                .into());
            }
            tokio::select! {
                _ = tokio::time::sleep(HEALTH_POLL) => {}
                _ = self.cancel.cancelled() => return Err("interrupted".into()),
            }
        }
    }

    /// Create or update membership `i`: wait for its Router to answer, take out what it
    /// routes to that is not a member, and add each member as soon as that worker
    /// answers `/health` (members in parallel). The record follows every change.
    pub(super) async fn sync_members(&self, rec: &Recorder<'_>, i: usize) -> StepResult {
        let r = &self.graph.resources[i];
        let Target::Membership(m) = r.target else {
            return Err("not a membership".into());
        };
        let membership = &self.launch.memberships[m];
        let http = http();
        let Some(api) = self.router_api(&self.launch.frontend, &membership.admin_url) else {
            return Err(format!("frontend `{}` has no admin API", self.launch.frontend).into());
        };
        let t = Instant::now();
        rec.created_if_new(&r.address, || {
            let mut record = self.new_record(i, Status::Pending);
            record_members(self.graph, &mut record, &r.address, &[]);
            record
        })?;
        let deadline = Instant::now() + Duration::from_secs(self.health.timeout_secs);
        while !api.admin.live(&http, &api.url).await {
            if Instant::now() >= deadline {
                return Err(
                    format!("`{}` did not answer at {}", membership.router, api.url).into(),
                );
            }
            tokio::select! {
                _ = tokio::time::sleep(HEALTH_POLL) => {}
                _ = self.cancel.cancelled() => return Err("interrupted".into()),
            }
        }
        let desired = members_of(&r.spec);
        let resolve = |u: &str| self.exec.bindings().resolve(u);
        let failed =
            |doing: &str, e| router_failure(&self.launch.deployment, &membership.router, doing, e);
        let live: BTreeSet<String> = api
            .admin
            .list(&http, &api.url)
            .await
            .map_err(|e| failed("listing the Router's workers", e))?
            .into_iter()
            .collect();
        let wanted: BTreeSet<String> = desired.iter().map(|(u, _)| resolve(u)).collect();
        for extra in live.difference(&wanted) {
            api.admin
                .remove(&http, &api.url, extra)
                .await
                .map_err(|e| failed(&format!("taking {extra} out of its Router"), e))?;
        }
        // What the Router has of the members now, kept in the record as it grows.
        let present: Vec<(String, String)> = desired
            .iter()
            .filter(|(u, _)| live.contains(&resolve(u)))
            .cloned()
            .collect();
        rec.members(&r.address, |now| *now = present)?;
        let missing: Vec<&(String, String)> = desired
            .iter()
            .filter(|(u, _)| !live.contains(&resolve(u)))
            .collect();
        let runtimes: Vec<(String, crate::state::Runtime)> = rec.read(|s| {
            missing
                .iter()
                .filter_map(|(_, w)| Some((w.clone(), s.resources.get(w)?.runtime.clone()?)))
                .collect()
        });
        let adds = missing.iter().map(|(url, worker)| {
            let http = &http;
            let api = &api;
            let runtimes = &runtimes;
            let desired = &desired;
            let resolve = &resolve;
            let failed = &failed;
            async move {
                let own: Vec<(String, crate::state::Runtime)> = runtimes
                    .iter()
                    .filter(|(a, _)| a == worker)
                    .cloned()
                    .collect();
                self.wait_healthy(std::slice::from_ref(url), &own).await?;
                let resolved = resolve(url);
                let registration = member(membership, worker)?.registration(&resolved);
                api.admin
                    .add(http, &api.url, registration)
                    .await
                    .map_err(|e| failed(&format!("adding `{worker}` to its Router"), e))?;
                rec.members(&r.address, |now| {
                    now.push(((*url).clone(), (*worker).clone()));
                    now.sort_by_key(|m| desired.iter().position(|o| o == m).unwrap_or(usize::MAX));
                })?;
                Ok::<(), StepError>(())
            }
        });
        let results = futures::future::join_all(adds).await;
        let added = results.iter().filter(|r| r.is_ok()).count();
        if let Some(Err(e)) = results.into_iter().find(std::result::Result::is_err) {
            rec.failed(&r.address, &e.message)?;
            return Err(e);
        }
        let mut record = self.new_record(i, Status::Running);
        record_members(self.graph, &mut record, &r.address, &desired);
        rec.created(&r.address, record)?;
        Ok(format!(
            "{} member(s), {added} added, {} taken out, in {:.2}s",
            desired.len(),
            live.difference(&wanted).count(),
            t.elapsed().as_secs_f64()
        ))
    }
}

/// What a health probe waits for, in a message: `http://ip:port/health` for a plain
/// GET, else the probe in one line.
fn awaited(probe: &Probe, resolve: &dyn Fn(&str) -> String) -> String {
    match probe {
        Probe::Http { urls, path } => urls
            .iter()
            .map(|u| format!("{}{path}", resolve(u)))
            .collect::<Vec<_>>()
            .join(", "),
        other => resolve(&crate::launch::render::describe_probe(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_router_that_does_not_answer_is_named_with_what_to_check() {
        let e = router_failure(
            "d",
            "router[0]",
            "putting `worker.agg[0].node[0]` back into its Router",
            AdminError::Transport {
                operation: "POST /add_worker".into(),
                router: "http://127.0.0.1:8000".into(),
                timed_out: true,
                detail: "timed out".into(),
            },
        );
        assert_eq!(
            e.message,
            "putting `worker.agg[0].node[0]` back into its Router: the Router `router[0]` (http://127.0.0.1:8000) did not answer `POST /add_worker` within 30s: timed out"
        );
        let help = e.help.unwrap();
        assert!(
            help.contains("`srt logs d 'router[0]'`") && help.contains("not stopped"),
            "{help}"
        );
        // A refusal is the Router's own answer, without a help.
        let e = router_failure(
            "d",
            "router[0]",
            "adding",
            AdminError::Answer("refused: 400".into()),
        );
        assert_eq!((e.message.as_str(), e.help), ("adding: refused: 400", None));
    }
}
