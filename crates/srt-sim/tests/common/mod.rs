//! What the simulators' integration tests share: free ports, a simulator process killed
//! on drop with its output captured, and HTTP helpers.

#![allow(dead_code)]

use std::net::TcpListener as StdListener;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A free loopback port (bound once by the kernel, then released).
pub(crate) fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts of disjoint blocks of consecutive free loopback ports, one per requested size.
/// Every block is held until all are chosen, so no two blocks overlap.
pub(crate) fn free_blocks(sizes: &[u16]) -> Vec<u16> {
    let mut held = Vec::new();
    let mut starts = Vec::new();
    for &n in sizes {
        let mut found = None;
        for _ in 0..200 {
            let probe = StdListener::bind("127.0.0.1:0").unwrap();
            let base = probe.local_addr().unwrap().port();
            if base > 65_000 {
                continue;
            }
            let mut block = vec![probe];
            block.extend(
                (base + 1..base + n).map_while(|p| StdListener::bind(("127.0.0.1", p)).ok()),
            );
            if block.len() == n as usize {
                found = Some((base, block));
                break;
            }
        }
        let (base, block) = found.unwrap_or_else(|| panic!("no block of {n} free ports"));
        starts.push(base);
        held.extend(block);
    }
    starts
}

/// A running simulator, killed on drop.
pub(crate) struct Sim {
    pub(crate) child: Child,
    dir: tempfile::TempDir,
}

impl Sim {
    /// Starts the simulator binary `bin` with `args`, its knobs and the engines' variables
    /// cleared but for `env`, and a 50 ms startup delay.
    pub(crate) fn start(bin: &str, args: &[&str], env: &[(&str, &str)]) -> Sim {
        let dir = tempfile::tempdir().unwrap();
        let out = std::fs::File::create(dir.path().join("out")).unwrap();
        let err = std::fs::File::create(dir.path().join("err")).unwrap();
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .env("SRT_SIM_STARTUP_DELAY_MS", "50");
        for k in [
            "VLLM_PORT",
            "VLLM_NIXL_SIDE_CHANNEL_HOST",
            "VLLM_NIXL_SIDE_CHANNEL_PORT",
            "VLLM_HOST_IP",
            "SRT_SIM_EXIT_DURING_STARTUP",
            "SRT_SIM_EXIT_AFTER_MS",
            "SRT_SIM_UNHEALTHY_AFTER_MS",
            "SRT_SIM_TOKEN_DELAY_MS",
            "SRT_SIM_DECODE_US_PER_SEQ",
            "SRT_SIM_PREFILL_US_PER_TOKEN",
            "SRT_SIM_NIXL_HANDSHAKE",
            "SRT_SIM_PD_WAIT_MS",
            "CUDA_VISIBLE_DEVICES",
        ] {
            cmd.env_remove(k);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        Sim {
            child: cmd.spawn().unwrap(),
            dir,
        }
    }

    pub(crate) fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }

    pub(crate) fn stdout(&self) -> String {
        self.read("out")
    }

    pub(crate) fn stderr(&self) -> String {
        self.read("err")
    }

    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(st) = self.child.try_wait().unwrap() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Waits until stdout contains `needle`.
    pub(crate) fn wait_log(&mut self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.stdout().contains(needle) {
                return;
            }
            if let Some(st) = self.child.try_wait().unwrap() {
                panic!(
                    "simulator exited ({st}) before logging {needle:?}: {}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "no {needle:?} in the log within {timeout:?}: {}",
            self.stdout()
        );
    }

    pub(crate) fn terminate(&mut self) -> Option<ExitStatus> {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        self.wait_exit(Duration::from_secs(5))
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// Polls `/health` until 200; fails if the process exits or the deadline passes.
pub(crate) async fn wait_healthy(sim: &mut Sim, port: u16) {
    let c = client();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(r) = c
            .get(format!("http://127.0.0.1:{port}/health"))
            .timeout(Duration::from_millis(500))
            .send()
            .await
        {
            if r.status() == 200 {
                return;
            }
        }
        if let Some(st) = sim.child.try_wait().unwrap() {
            panic!("simulator exited ({st}): {}", sim.stderr());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("simulator on {port} never became healthy: {}", sim.stdout());
}

pub(crate) async fn post(
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, Value) {
    let mut req = client()
        .post(format!("http://127.0.0.1:{port}{path}"))
        .json(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

pub(crate) async fn get_text(port: u16, path: &str) -> String {
    client()
        .get(format!("http://127.0.0.1:{port}{path}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

pub(crate) fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l[series.len()..].trim().parse().ok())
}

/// The tiny test model (a `tokenizer.json` and a `config.json` with a context of 512).
pub(crate) const TINY_MODEL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/tiny-model"
);

/// `srt-sglang-sim` arguments: the tiny model served as `tiny` on `127.0.0.1:port`, then
/// `rest`.
pub(crate) fn sglang_args(port: u16, rest: &[&str]) -> Vec<String> {
    let port = port.to_string();
    [
        "--model-path",
        TINY_MODEL,
        "--served-model-name",
        "tiny",
        "--host",
        "127.0.0.1",
        "--port",
        &port,
    ]
    .iter()
    .chain(rest)
    .map(ToString::to_string)
    .collect()
}

/// A prefill (its bootstrap server on `boot`) and a decode of the tiny model on loopback,
/// both over NIXL and without warmup; `{boot}` in the decode's extra flags is `boot`.
pub(crate) struct SglangPair {
    pub(crate) prefill: Sim,
    pub(crate) decode: Sim,
    pub(crate) p_port: u16,
    pub(crate) d_port: u16,
    pub(crate) boot: u16,
}

/// Starts an [`SglangPair`] of `bin` (not waiting for it).
pub(crate) fn sglang_pair(
    bin: &str,
    decode_env: &[(&str, &str)],
    decode_extra: &[&str],
) -> SglangPair {
    let b = free_blocks(&[1, 1, 1]);
    let (p_port, d_port, boot) = (b[0], b[1], b[2]);
    let boot_s = boot.to_string();
    let start = |port: u16, flags: &[&str], env: &[(&str, &str)]| {
        let mut rest = flags.to_vec();
        rest.extend([
            "--disaggregation-transfer-backend",
            "nixl",
            "--skip-server-warmup",
        ]);
        let args = sglang_args(port, &rest);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Sim::start(bin, &args, env)
    };
    let prefill = start(
        p_port,
        &[
            "--disaggregation-mode",
            "prefill",
            "--disaggregation-bootstrap-port",
            &boot_s,
        ],
        &[],
    );
    let extra: Vec<String> = decode_extra
        .iter()
        .map(|w| w.replace("{boot}", &boot_s))
        .collect();
    let mut d = vec!["--disaggregation-mode", "decode"];
    d.extend(extra.iter().map(String::as_str));
    let decode = start(d_port, &d, decode_env);
    SglangPair {
        prefill,
        decode,
        p_port,
        d_port,
        boot,
    }
}
