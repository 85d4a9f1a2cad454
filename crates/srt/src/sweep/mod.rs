//! Sweeps as successive applies: the points of a `sweep:` recipe
//! ([`crate::recipe::sweep`]) run one after another in one deployment, each an apply
//! that replaces only what its values change. This module works out, from the points'
//! graphs, what each step replaces and what it costs in worker starts, an order of the
//! points that starts fewer, and what running every point as a fresh deployment would
//! cost instead; [`results`] keeps each point's benchmark and draws the sweep.
//!
//! Worker starts are what a sweep's wall time is made of (a worker loads its model when
//! it starts: minutes on a real engine), so they are the cost compared.

pub mod plot;
pub mod png;
pub mod results;

use crate::graph::{Kind, ResourceGraph};
use std::collections::{HashMap, HashSet};

/// The most points reordered: the order is worked out from every pair of points.
pub const MAX_REORDERED: usize = 256;

/// A point's desired graph, reduced to what comparing points needs.
#[derive(Clone, Debug)]
pub struct Shape {
    /// Every process resource (workers and the frontend's), by address, with its hash.
    processes: HashMap<String, (Kind, String)>,
    /// How many worker processes.
    pub workers: usize,
    /// GPUs the workers use.
    pub gpus: usize,
}

impl Shape {
    /// The shape of `graph`; `gpus` is what its workers use (from its launch plan).
    pub fn of(graph: &ResourceGraph, gpus: usize) -> Shape {
        Shape::from_processes(
            graph
                .resources
                .iter()
                .filter(|r| r.kind.is_process())
                .map(|r| (r.address.clone(), r.kind, r.hash.clone())),
            gpus,
        )
    }

    /// The shape of these processes (address, kind, hash).
    pub fn from_processes(
        processes: impl IntoIterator<Item = (String, Kind, String)>,
        gpus: usize,
    ) -> Shape {
        let processes: HashMap<String, (Kind, String)> =
            processes.into_iter().map(|(a, k, h)| (a, (k, h))).collect();
        let workers = processes
            .values()
            .filter(|(k, _)| *k == Kind::Worker)
            .count();
        Shape {
            processes,
            workers,
            gpus,
        }
    }
}

impl Shape {
    /// Whether `other` runs exactly the same processes: the points differ only in what
    /// no process runs (the benchmark).
    pub fn same_deployment(&self, other: &Shape) -> bool {
        self.processes == other.processes
    }
}

/// The curve each point is drawn on: points of the same deployment share one, named by
/// the parameter values they all share (`seqs=8`; a point alone, by all of its).
pub fn curves(shapes: &[Shape], params: &[Vec<(String, String)>]) -> Vec<String> {
    (0..shapes.len())
        .map(|i| {
            let group: Vec<usize> = (0..shapes.len())
                .filter(|&j| shapes[j].same_deployment(&shapes[i]))
                .collect();
            let shared: Vec<String> = params[i]
                .iter()
                .filter(|(k, v)| {
                    group
                        .iter()
                        .all(|&j| params[j].iter().any(|(k2, v2)| k2 == k && v2 == v))
                })
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            match shared.is_empty() {
                true => "every point".to_string(),
                false => shared.join(", "),
            }
        })
        .collect()
}

/// What going to a point costs: the processes it starts (new or changed ones, sorted)
/// and how many of them are workers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// Processes started, by address: created or replaced.
    pub starts: Vec<String>,
    /// Those of them the previous point did not run (created, not replaced).
    pub new: Vec<String>,
    /// Worker processes among them.
    pub worker_starts: usize,
    /// Worker processes that keep running.
    pub workers_kept: usize,
    /// Processes stopped and not started again (the previous point had them).
    pub stops: Vec<String>,
}

/// What going from `from` (nothing when `None`) to `to` starts and keeps.
pub fn step(from: Option<&Shape>, to: &Shape) -> Step {
    let mut starts: Vec<String> = Vec::new();
    let mut worker_starts = 0;
    for (address, (kind, hash)) in &to.processes {
        let kept = from
            .and_then(|f| f.processes.get(address))
            .is_some_and(|(_, h)| h == hash);
        if !kept {
            starts.push(address.clone());
            worker_starts += usize::from(*kind == Kind::Worker);
        }
    }
    starts.sort();
    let new: Vec<String> = starts
        .iter()
        .filter(|a| from.is_some_and(|f| !f.processes.contains_key(*a)))
        .cloned()
        .collect();
    let mut stops: Vec<String> = from
        .map(|f| {
            f.processes
                .keys()
                .filter(|a| !to.processes.contains_key(*a))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    stops.sort();
    Step {
        workers_kept: to.workers - worker_starts,
        new,
        starts,
        worker_starts,
        stops,
    }
}

/// Worker starts going from `from` to `to`, without listing them.
fn cost(from: &Shape, to: &Shape) -> usize {
    to.processes
        .iter()
        .filter(|(a, (k, h))| {
            *k == Kind::Worker && from.processes.get(*a).is_none_or(|(_, fh)| fh != h)
        })
        .count()
}

/// The order the points run in, and why it is not the written one when it is not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Order {
    /// Point indices (into the written order), in the order they run.
    pub points: Vec<usize>,
    /// Worker starts of the sweep in this order.
    pub worker_starts: usize,
    /// Worker starts in the written order.
    pub written_worker_starts: usize,
}

impl Order {
    /// Whether the points run in another order than written.
    pub fn reordered(&self) -> bool {
        self.points.iter().enumerate().any(|(i, &p)| i != p)
    }
}

/// Worker starts of running `shapes` in `order`, from nothing.
pub fn total_starts(shapes: &[Shape], order: &[usize]) -> usize {
    let mut prev: Option<&Shape> = None;
    let mut total = 0;
    for &i in order {
        total += match prev {
            None => shapes[i].workers,
            Some(p) => cost(p, &shapes[i]),
        };
        prev = Some(&shapes[i]);
    }
    total
}

/// An order of the points starting fewer workers: from the first point written, each
/// next point the one that starts the fewest workers from the current (the earliest
/// written among equals), kept only when it starts fewer than the written order. Sweeps
/// of more than [`MAX_REORDERED`] points run as written.
pub fn order(shapes: &[Shape]) -> Order {
    let written: Vec<usize> = (0..shapes.len()).collect();
    let written_starts = total_starts(shapes, &written);
    let keep = Order {
        points: written.clone(),
        worker_starts: written_starts,
        written_worker_starts: written_starts,
    };
    if shapes.len() < 3 || shapes.len() > MAX_REORDERED {
        return keep;
    }
    let mut left: HashSet<usize> = (1..shapes.len()).collect();
    let mut points = vec![0];
    while !left.is_empty() {
        let at = &shapes[*points.last().expect("one point")];
        let next = *left
            .iter()
            .min_by_key(|&&j| (cost(at, &shapes[j]), j))
            .expect("points left");
        left.remove(&next);
        points.push(next);
    }
    let starts = total_starts(shapes, &points);
    if starts >= written_starts {
        return keep;
    }
    Order {
        points,
        worker_starts: starts,
        written_worker_starts: written_starts,
    }
}

/// Worker starts of running every point as a fresh deployment (what a job per point
/// costs): every point starts all its workers.
pub fn fresh_starts(shapes: &[Shape]) -> usize {
    shapes.iter().map(|s| s.workers).sum()
}

#[cfg(test)]
mod tests;
