//! The TCP ports an SGLang 0.5.23 process binds, as its source has them (the common core
//! binds them: [`crate::common::ports`]).
//!
//! On node rank 0:
//!
//! - the HTTP API on `--host:--port` (uvicorn);
//! - the torch.distributed store (`_resolve_dist_init_method` in
//!   `srt/distributed/bootstrap.py`): the `--dist-init-addr` port when given, else
//!   `--nccl-port` on `--host`; without `--nccl-port` SGLang picks a free port itself
//!   (`PortArgs.init_new`: `get_free_port_below_ephemeral`) and the simulator binds none;
//! - with attention DP (`attn_dp_size > 1`), the ZMQ ports `PortArgs.init_new` derives
//!   (`srt/server_args.py`): `port_base .. port_base + 5` (tokenizer, detokenizer, RPC,
//!   metrics, scheduler input, load collector), where `port_base` is one past the
//!   dist-init port, and the dist-init port is `--dist-init-addr`'s, or `--port` plus 233
//!   (minus 233 past 65535) on one node without it; `port_base` is the dist-init port
//!   less 7 when the six would pass 65535;
//! - on a prefill, the bootstrap server on `--host:--disaggregation-bootstrap-port`
//!   (`CommonKVBootstrapServer`, `srt/disaggregation/common/conn.py`).
//!
//! On other nodes: the stand-in health server on `--host:--port` (`--port 0` allowed).
//!
//! The store and the ZMQ ports are bound on all interfaces: only the port matters for a
//! collision, and the dist-init host may be another node's address.

use super::config::{Mode, SimConfig};
use crate::common::ports::{self, offset_port, Purpose};

/// SGLang's `ZMQ_TCP_PORT_DELTA`.
const ZMQ_TCP_PORT_DELTA: i64 = 233;

/// What `PortArgs.init_new` names each derived port.
const DERIVED: [&str; 6] = [
    "tokenizer",
    "detokenizer",
    "rpc",
    "metrics",
    "scheduler input",
    "load collector",
];

/// Why an SGLang process binds a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerKind {
    /// The HTTP API (node rank 0).
    Http,
    /// The stand-in health server of a node with `--node-rank >= 1`.
    StandIn,
    /// The torch.distributed store at the `--dist-init-addr` port.
    DistInit,
    /// The torch.distributed store at `--nccl-port`.
    NcclPort,
    /// A ZMQ port attention DP derives (index into tokenizer, detokenizer, rpc, metrics,
    /// scheduler input, load collector).
    Derived(usize),
    /// The prefill's bootstrap server.
    Bootstrap,
}

/// One port an SGLang process binds.
pub type PlannedListener = ports::PlannedListener<ListenerKind>;

impl Purpose for ListenerKind {
    fn describe(&self) -> String {
        match *self {
            ListenerKind::Http => "HTTP API".into(),
            ListenerKind::StandIn => "stand-in health server (node rank >= 1)".into(),
            ListenerKind::DistInit => "torch.distributed store (--dist-init-addr)".into(),
            ListenerKind::NcclPort => "torch.distributed store (--nccl-port)".into(),
            ListenerKind::Derived(i) => format!("attention-DP {} port", DERIVED[i]),
            ListenerKind::Bootstrap => "disaggregation bootstrap server".into(),
        }
    }
}

/// Every listener of the process `cfg` describes; `dist_init_port` is `--dist-init-addr`'s.
pub fn plan(cfg: &SimConfig, dist_init_port: Option<u16>) -> Result<Vec<PlannedListener>, String> {
    let a = &cfg.args;
    let at = |kind, host: &str, port: u16| PlannedListener {
        kind,
        host: host.to_string(),
        port,
    };
    let http_port = a.port as u16;
    if !cfg.leader {
        return Ok(vec![at(ListenerKind::StandIn, &a.host, http_port)]);
    }
    let mut out = vec![at(ListenerKind::Http, &a.host, http_port)];
    match (dist_init_port, a.nccl_port) {
        (Some(p), _) => out.push(at(ListenerKind::DistInit, "0.0.0.0", p)),
        (None, Some(p)) => out.push(at(ListenerKind::NcclPort, "0.0.0.0", p as u16)),
        (None, None) => {}
    }
    if cfg.attn_dp_size > 1 {
        let dist = match dist_init_port {
            Some(p) => i64::from(p),
            None if a.port + ZMQ_TCP_PORT_DELTA > 65535 => a.port - ZMQ_TCP_PORT_DELTA,
            None => a.port + ZMQ_TCP_PORT_DELTA,
        };
        let base = if dist + 6 > 65535 { dist - 7 } else { dist + 1 };
        let base = u16::try_from(base)
            .map_err(|_| format!("attention-DP port base {base} is not a port"))?;
        for (i, _) in DERIVED.iter().enumerate() {
            out.push(at(
                ListenerKind::Derived(i),
                "0.0.0.0",
                offset_port("attention-DP", base, i as u32)?,
            ));
        }
    }
    if cfg.mode == Mode::Prefill {
        out.push(at(
            ListenerKind::Bootstrap,
            &a.host,
            a.disaggregation_bootstrap_port as u16,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn plan_for(argv: &str) -> Vec<(ListenerKind, String, u16)> {
        let argv: Vec<String> = shlex::split(&format!("--model-path /m {argv}")).unwrap();
        SimConfig::from_argv_env(&argv, &HashMap::new())
            .unwrap()
            .listeners
            .into_iter()
            .map(|l| (l.kind, l.host, l.port))
            .collect()
    }

    #[test]
    fn aggregate_server() {
        assert_eq!(
            plan_for("--port 6100"),
            vec![(ListenerKind::Http, "127.0.0.1".into(), 6100)],
            "no --nccl-port: SGLang picks one; nothing bound for it"
        );
        assert_eq!(
            plan_for("--host 0.0.0.0 --port 6100 --nccl-port 17500"),
            vec![
                (ListenerKind::Http, "0.0.0.0".into(), 6100),
                (ListenerKind::NcclPort, "0.0.0.0".into(), 17500),
            ]
        );
    }

    #[test]
    fn prefill_binds_its_bootstrap_server() {
        let got = plan_for(
            "--host 0.0.0.0 --port 6100 --nccl-port 8300 --tp-size 2 --disaggregation-mode \
             prefill --disaggregation-bootstrap-port 7200 --disaggregation-transfer-backend nixl",
        );
        assert_eq!(got[2], (ListenerKind::Bootstrap, "0.0.0.0".into(), 7200));
        let got = plan_for("--port 6100 --disaggregation-mode prefill");
        assert_eq!(got[1], (ListenerKind::Bootstrap, "127.0.0.1".into(), 8998));
        let got = plan_for("--port 6100 --disaggregation-mode decode");
        assert_eq!(got.len(), 1, "no bootstrap server on a decode");
    }

    #[test]
    fn multi_node_leader_and_follower() {
        let got = plan_for(
            "--port 6100 --nccl-port 17500 --tp-size 4 --nnodes 2 --node-rank 0 \
             --dist-init-addr 10.0.0.1:8300",
        );
        assert_eq!(
            got[1],
            (ListenerKind::DistInit, "0.0.0.0".into(), 8300),
            "--dist-init-addr wins over --nccl-port"
        );
        assert_eq!(got.len(), 2);
        let got = plan_for(
            "--host 0.0.0.0 --port 0 --tp-size 4 --nnodes 2 --node-rank 1 \
             --dist-init-addr 10.0.0.1:8300 --disaggregation-mode prefill",
        );
        assert_eq!(got, vec![(ListenerKind::StandIn, "0.0.0.0".into(), 0)]);
    }

    #[test]
    fn attention_dp_derives_six_ports() {
        let got = plan_for("--port 30000 --nccl-port 17500 --tp-size 2 --attn-dp-size 2");
        let derived: Vec<u16> = got
            .iter()
            .filter(|g| matches!(g.0, ListenerKind::Derived(_)))
            .map(|g| g.2)
            .collect();
        assert_eq!(derived, (30234..30240).collect::<Vec<_>>());
        let got =
            plan_for("--port 6100 --tp-size 4 --attn-dp-size 2 --nnodes 2 --dist-init-addr h:8300");
        let derived: Vec<u16> = got.iter().skip(2).map(|g| g.2).collect();
        assert_eq!(derived, (8301..8307).collect::<Vec<_>>());
        let got = plan_for("--port 65400 --tp-size 2 --attn-dp-size 2");
        assert_eq!(got[1].2, 65400 - 233 + 1, "past 65535: below --port");
    }
}
