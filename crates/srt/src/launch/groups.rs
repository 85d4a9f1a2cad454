//! Which nodes must share one allocation, and which nodes a process names.
//!
//! An executor that holds nodes in allocations (SLURM jobs) may hold a deployment's
//! nodes in several, so that one can be added, lost or renewed while the others serve.
//! Some nodes cannot be apart: the nodes of one MPI job (a step spans nodes of one job
//! only), and the nodes of one worker endpoint (its processes are one engine instance,
//! replaced as one unit). [`LaunchPlan::node_groups`] gives the smallest such groups.
//!
//! A process also depends on the allocations of the nodes it *names*: a worker that
//! reaches a service on another node (`<node0-ip>:2379`), a Router that lists workers
//! on its command line. When that node's allocation is replaced, the address it named
//! may change, so the process must start again ([`LaunchProcess::nodes_named`]).

use super::{LaunchPlan, LaunchProcess};
use std::collections::{BTreeSet, HashMap};

impl LaunchPlan {
    /// The plan's nodes cut into the smallest groups that must share one allocation:
    /// each sorted, groups in the order of their first node, every node in exactly one
    /// (a node without a process alone).
    pub fn node_groups(&self) -> Vec<Vec<usize>> {
        let size = self
            .processes
            .iter()
            .flat_map(LaunchProcess::nodes)
            .map(|n| n + 1)
            .chain([self.nodes.len()])
            .max()
            .unwrap_or(0);
        let mut sets = DisjointSets::new(size);
        let mut endpoints: HashMap<(&str, u32), usize> = HashMap::new();
        for p in &self.processes {
            let nodes = p.nodes();
            for pair in nodes.windows(2) {
                sets.join(pair[0], pair[1]);
            }
            if let Some(w) = &p.worker {
                let first = *endpoints
                    .entry((w.role.name(), w.endpoint))
                    .or_insert(p.node);
                sets.join(first, p.node);
            }
        }
        let mut groups: HashMap<usize, Vec<usize>> = HashMap::new();
        for n in 0..size {
            groups.entry(sets.root(n)).or_default().push(n);
        }
        let mut groups: Vec<Vec<usize>> = groups.into_values().collect();
        groups.sort_unstable_by_key(|g| g[0]);
        groups
    }
}

impl LaunchProcess {
    /// The nodes it runs on: its ranks' (rank 0's first), else its own.
    pub fn nodes(&self) -> Vec<usize> {
        self.ranks
            .as_ref()
            .map_or_else(|| vec![self.node], |r| r.nodes.clone())
    }

    /// Every node its command line, environment and files name by placeholder
    /// (`<nodeN-ip>`, `<nodeN-host>`), and those it runs on.
    pub fn nodes_named(&self) -> BTreeSet<usize> {
        let mut out: BTreeSet<usize> = self.nodes().into_iter().collect();
        let texts = self
            .argv
            .iter()
            .chain(self.env.values().map(String::as_str))
            .chain(self.files.values().map(String::as_str));
        for text in texts {
            named_nodes(text, &mut out);
        }
        out
    }
}

/// Add to `out` the index of every node placeholder in `text` (written as
/// [`super::node_ip`] and [`super::node_host`] write them).
pub fn named_nodes(text: &str, out: &mut BTreeSet<usize>) {
    const OPEN: &str = "<node";
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        let after = &rest[at + OPEN.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let canonical = digits == 1 || (digits > 1 && !after.starts_with('0'));
        let tail = &after[digits..];
        if canonical && (tail.starts_with("-ip>") || tail.starts_with("-host>")) {
            if let Ok(i) = after[..digits].parse::<usize>() {
                out.insert(i);
            }
        }
        rest = after;
    }
}

/// Union-find over node indices.
struct DisjointSets {
    parent: Vec<usize>,
}

impl DisjointSets {
    fn new(size: usize) -> Self {
        DisjointSets {
            parent: (0..size).collect(),
        }
    }

    fn root(&mut self, mut n: usize) -> usize {
        while self.parent[n] != n {
            self.parent[n] = self.parent[self.parent[n]];
            n = self.parent[n];
        }
        n
    }

    /// Join the groups of `a` and `b`; the smaller root stays.
    fn join(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.root(a), self.root(b));
        let (keep, other) = if ra < rb { (ra, rb) } else { (rb, ra) };
        self.parent[other] = keep;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_nodes_are_read_as_resolve_reads_them() {
        let mut out = BTreeSet::new();
        named_nodes(
            "http://<node3-ip>:6100 <node12-host> <node01-ip> <node4-port> <node7-ip",
            &mut out,
        );
        assert_eq!(out, BTreeSet::from([3, 12]));
    }

    #[test]
    fn joined_sets_share_the_smallest_root() {
        let mut s = DisjointSets::new(6);
        s.join(4, 2);
        s.join(5, 4);
        s.join(0, 1);
        assert_eq!((s.root(5), s.root(2), s.root(1), s.root(3)), (2, 2, 0, 3));
    }
}
