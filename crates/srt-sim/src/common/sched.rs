//! The timing model: each DP engine runs a continuous-batching scheduler, so the figures
//! a serving benchmark measures against the simulator mean something.
//!
//! A request is a sequence with `prefill` prompt tokens to compute and `tokens` tokens to
//! generate. The engine loops over *steps* (vLLM's model forward passes):
//!
//! 1. waiting sequences are admitted first come, first served, while fewer than
//!    `max_num_seqs` run;
//! 2. every running sequence past its prefill decodes one token; what is left of the
//!    token budget (`max_num_batched_tokens` less one per decoding sequence) goes to
//!    prefills in admission order, chunked when a prompt does not fit (chunked prefill);
//! 3. the step lasts `step + per_seq x decoding sequences + prefill_per_token x prefill
//!    tokens in the step`;
//! 4. at its end each decoding sequence gets a token, and a sequence whose prefill
//!    completed in it gets its first token.
//!
//! So time to first token grows with the prompt length and with the prefills queued
//! ahead, inter-token latency is one step (longer with more sequences batched and with
//! prefills sharing the step), and a batch of `c` sequences yields `c` tokens per step:
//! throughput grows with concurrency while latency grows too. Steps follow each other on
//! absolute deadlines, so timer lateness does not accumulate.
//!
//! With every cost zero (the default) there is no scheduler: tokens are ready at once.
//! A [`ForwardSleep`] (SGLang's `/slow_down`) adds its sleep to every step while set,
//! and times even an engine without costs while it is.
//!
//! [`Scheduler::load`] counts the engine's sequences as a server reports them: running
//! (admitted, not finished) and waiting (queued for a slot). Without a scheduler a
//! request runs from its submission until its [`Tokens`] are dropped.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How late a step may start and still keep the previous step's deadline as its start.
const MAX_LATE: Duration = Duration::from_millis(5);

/// The costs and limits of the model (see the crate docs for the knobs setting them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Fixed time of every step (`SRT_SIM_TOKEN_DELAY_MS`).
    pub step: Duration,
    /// Added per decoding sequence in the step (`SRT_SIM_DECODE_US_PER_SEQ`).
    pub per_seq: Duration,
    /// Added per prompt token computed in the step (`SRT_SIM_PREFILL_US_PER_TOKEN`).
    pub prefill_per_token: Duration,
    /// Most sequences running at once (`--max-num-seqs`, 256).
    pub max_num_seqs: usize,
    /// Tokens one step computes at most (`--max-num-batched-tokens`, 8192).
    pub max_batched_tokens: u64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            step: Duration::ZERO,
            per_seq: Duration::ZERO,
            prefill_per_token: Duration::ZERO,
            max_num_seqs: 256,
            max_batched_tokens: 8192,
        }
    }
}

impl Timing {
    /// No cost at all: tokens are ready at once.
    pub fn is_instant(&self) -> bool {
        self.step.is_zero() && self.per_seq.is_zero() && self.prefill_per_token.is_zero()
    }

    /// How long a step with `decoding` sequences and `prefill` prompt tokens lasts.
    pub fn step_time(&self, decoding: usize, prefill: u64) -> Duration {
        self.step
            + self.per_seq * decoding as u32
            + self.prefill_per_token * u32::try_from(prefill).unwrap_or(u32::MAX)
    }
}

/// One request's sequence.
#[derive(Debug)]
struct Seq {
    prefill_left: u64,
    tokens_left: u64,
    tokens: mpsc::UnboundedSender<()>,
}

/// A sleep added to every step while set (SGLang's `/slow_down`, its
/// `forward_sleep_time`), shared by the engines of a server.
#[derive(Debug, Clone, Default)]
pub struct ForwardSleep(Arc<AtomicU64>);

impl ForwardSleep {
    /// Every step from now on sleeps `d` more; `None` stops it.
    pub fn set(&self, d: Option<Duration>) {
        let nanos = d.map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        self.0.store(nanos, Ordering::Relaxed);
    }

    /// The sleep now.
    pub fn get(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

/// One engine's scheduler, started on first use (inside the server's runtime).
#[derive(Debug)]
pub struct Scheduler {
    timing: Timing,
    queue: OnceLock<mpsc::UnboundedSender<Seq>>,
    load: Arc<Load>,
    sleep: ForwardSleep,
}

/// Sequences of an engine, as its scheduler counts them.
#[derive(Debug, Default)]
struct Load {
    running: AtomicUsize,
    waiting: AtomicUsize,
}

/// A request counted as running until dropped (no scheduler: nothing else ends it).
#[derive(Debug)]
struct Running(Arc<Load>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Tokens of a submitted request as they are generated: one `()` per token.
pub struct Tokens(TokenSource);

enum TokenSource {
    /// Every token is ready now (`left` of them); the request runs while this lives.
    Instant {
        left: u64,
        _running: Option<Running>,
    },
    /// Tokens arrive from the scheduler.
    Timed(mpsc::UnboundedReceiver<()>),
}

impl Tokens {
    /// Wait for the next token; `false` when the sequence is over.
    pub async fn next(&mut self) -> bool {
        match &mut self.0 {
            TokenSource::Instant { left: 0, .. } => false,
            TokenSource::Instant { left, .. } => {
                *left -= 1;
                true
            }
            TokenSource::Timed(rx) => rx.recv().await.is_some(),
        }
    }
}

impl Scheduler {
    /// A scheduler with these costs (not started).
    pub fn new(timing: Timing) -> Scheduler {
        Scheduler {
            timing,
            queue: OnceLock::new(),
            load: Arc::default(),
            sleep: ForwardSleep::default(),
        }
    }

    /// The same scheduler, its steps slowed by `sleep` while that is set.
    pub fn slowed_by(self, sleep: ForwardSleep) -> Scheduler {
        Scheduler { sleep, ..self }
    }

    /// Sequences running (admitted, not finished) and waiting for a slot, now.
    pub fn load(&self) -> (usize, usize) {
        (
            self.load.running.load(Ordering::Relaxed),
            self.load.waiting.load(Ordering::Relaxed),
        )
    }

    /// Queue a request: `prefill` prompt tokens to compute, then `tokens` to generate.
    /// Dropping the returned [`Tokens`] abandons the request (a client gone).
    pub fn submit(&self, prefill: u64, tokens: u64) -> Tokens {
        let slowed = !self.sleep.get().is_zero();
        if (self.timing.is_instant() && !slowed) || tokens == 0 {
            let running = (tokens > 0).then(|| {
                self.load.running.fetch_add(1, Ordering::Relaxed);
                Running(self.load.clone())
            });
            return Tokens(TokenSource::Instant {
                left: tokens,
                _running: running,
            });
        }
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(run(self.timing, self.sleep.clone(), rx, self.load.clone()));
            tx
        });
        let (tx, rx) = mpsc::unbounded_channel();
        self.load.waiting.fetch_add(1, Ordering::Relaxed);
        let _ = queue.send(Seq {
            prefill_left: prefill,
            tokens_left: tokens,
            tokens: tx,
        });
        Tokens(TokenSource::Timed(rx))
    }
}

async fn run(
    t: Timing,
    sleep: ForwardSleep,
    mut queue: mpsc::UnboundedReceiver<Seq>,
    load: Arc<Load>,
) {
    let mut waiting: VecDeque<Seq> = VecDeque::new();
    let mut running: Vec<Seq> = Vec::new();
    let mut deadline = Instant::now();
    loop {
        while let Ok(s) = queue.try_recv() {
            waiting.push_back(s);
        }
        if running.is_empty() && waiting.is_empty() {
            match queue.recv().await {
                Some(s) => waiting.push_back(s),
                None => return,
            }
            // The engine was idle: its next step starts when the request arrived.
            deadline = Instant::now();
            continue;
        }
        while running.len() < t.max_num_seqs.max(1) {
            match waiting.pop_front() {
                Some(s) => {
                    load.waiting.fetch_sub(1, Ordering::Relaxed);
                    load.running.fetch_add(1, Ordering::Relaxed);
                    running.push(s);
                }
                None => break,
            }
        }
        // What this step computes: one token per decoding sequence, prefill chunks in
        // admission order with the rest of the budget.
        let decoding: Vec<bool> = running.iter().map(|s| s.prefill_left == 0).collect();
        let n_decoding = decoding.iter().filter(|d| **d).count();
        let mut budget = t
            .max_batched_tokens
            .saturating_sub(n_decoding as u64)
            .max(1);
        let mut prefill = 0;
        let mut first_token = vec![false; running.len()];
        for (i, s) in running.iter_mut().enumerate() {
            if decoding[i] || budget == 0 {
                continue;
            }
            let take = s.prefill_left.min(budget);
            s.prefill_left -= take;
            budget -= take;
            prefill += take;
            first_token[i] = s.prefill_left == 0;
        }
        // Steps follow each other on absolute deadlines (a timer's lateness does not add
        // up); when far behind, the next step starts now.
        let now = Instant::now();
        if now.saturating_duration_since(deadline) > MAX_LATE {
            deadline = now;
        }
        deadline += t.step_time(n_decoding, prefill) + sleep.get();
        tokio::time::sleep_until(deadline).await;
        let mut i = 0;
        running.retain_mut(|s| {
            let emits = decoding[i] || first_token[i];
            i += 1;
            let keep = if !emits {
                !s.tokens.is_closed()
            } else if s.tokens.send(()).is_err() {
                false
            } else {
                s.tokens_left -= 1;
                s.tokens_left > 0
            };
            if !keep {
                load.running.fetch_sub(1, Ordering::Relaxed);
            }
            keep
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(step_ms: u64, per_seq_us: u64, prefill_us: u64) -> Timing {
        Timing {
            step: Duration::from_millis(step_ms),
            per_seq: Duration::from_micros(per_seq_us),
            prefill_per_token: Duration::from_micros(prefill_us),
            ..Timing::default()
        }
    }

    /// Token times (ms after submission) of `n` requests submitted together.
    async fn times(s: &Scheduler, reqs: &[(u64, u64)]) -> Vec<Vec<f64>> {
        let start = Instant::now();
        let tasks: Vec<_> = reqs
            .iter()
            .map(|&(p, n)| {
                let mut toks = s.submit(p, n);
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    while toks.next().await {
                        out.push(start.elapsed().as_secs_f64() * 1000.0);
                    }
                    out
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    }

    fn close(got: f64, want: f64) {
        assert!((got - want).abs() < 1e-6, "{got} != {want}");
    }

    #[tokio::test(start_paused = true)]
    async fn one_request_prefill_then_steps() {
        // Step 10 ms + 1 ms per decoding sequence; 100 us per prompt token.
        let s = Scheduler::new(timing(10, 1000, 100));
        let t = times(&s, &[(200, 3)]).await;
        // Prefill step: 10 + 200 x 0.1 = 30 ms; then two decode steps of 11 ms.
        assert_eq!(t[0].len(), 3);
        close(t[0][0], 30.0);
        close(t[0][1], 41.0);
        close(t[0][2], 52.0);
    }

    #[tokio::test(start_paused = true)]
    async fn batching_shares_steps_and_chunks_prefills() {
        let mut tm = timing(10, 1000, 100);
        tm.max_batched_tokens = 300;
        let s = Scheduler::new(tm);
        // Two prompts of 200 tokens: the first step prefills 200 + 100 of the second
        // (10 + 30 ms = 40 ms: the first's first token); the next step decodes the first
        // and finishes the second's prefill (10 + 1 + 10 = 21 ms); then both decode
        // (10 + 2 = 12 ms per step).
        let t = times(&s, &[(200, 3), (200, 2)]).await;
        close(t[0][0], 40.0);
        close(t[0][1], 61.0);
        close(t[1][0], 61.0);
        close(t[0][2], 73.0);
        close(t[1][1], 73.0);
    }

    #[tokio::test(start_paused = true)]
    async fn max_num_seqs_queues_the_rest() {
        let mut tm = timing(10, 0, 0);
        tm.max_num_seqs = 1;
        let s = Scheduler::new(tm);
        let t = times(&s, &[(1, 2), (1, 2)]).await;
        assert_eq!(t[0], [10.0, 20.0]);
        assert_eq!(t[1], [30.0, 40.0]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_forward_sleep_lengthens_every_step_while_set() {
        let sleep = ForwardSleep::default();
        let s = Scheduler::new(timing(10, 0, 0)).slowed_by(sleep.clone());
        sleep.set(Some(Duration::from_millis(100)));
        assert_eq!(times(&s, &[(1, 2)]).await[0], [110.0, 220.0]);
        sleep.set(None);
        assert_eq!(times(&s, &[(1, 2)]).await[0], [10.0, 20.0]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_forward_sleep_times_an_otherwise_instant_engine() {
        let sleep = ForwardSleep::default();
        let s = Scheduler::new(Timing::default()).slowed_by(sleep.clone());
        sleep.set(Some(Duration::from_millis(50)));
        assert_eq!(times(&s, &[(1, 2)]).await[0], [50.0, 100.0]);
        sleep.set(None);
        assert!(times(&s, &[(1, 2)]).await[0].iter().all(|t| *t == 0.0));
    }

    #[tokio::test(start_paused = true)]
    async fn instant_when_free() {
        let s = Scheduler::new(Timing::default());
        let mut toks = s.submit(100, 2);
        assert_eq!(s.load(), (1, 0), "running until its tokens are dropped");
        assert!(toks.next().await && toks.next().await && !toks.next().await);
        drop(toks);
        assert_eq!(s.load(), (0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn load_counts_running_and_waiting() {
        let mut tm = timing(10, 0, 0);
        tm.max_num_seqs = 1;
        let s = Scheduler::new(tm);
        let mut a = s.submit(1, 2);
        let mut b = s.submit(1, 2);
        assert_eq!(
            s.load(),
            (0, 2),
            "queued before the scheduler has seen them"
        );
        assert!(a.next().await);
        assert_eq!(s.load(), (1, 1));
        assert!(a.next().await && !a.next().await);
        assert!(b.next().await);
        assert_eq!(s.load(), (1, 0));
        assert!(b.next().await && !b.next().await);
        assert_eq!(s.load(), (0, 0));
    }
}
