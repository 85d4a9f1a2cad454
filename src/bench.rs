//! `srt bench`: run a deployed deployment's benchmark again, without applying.

use crate::inspect::{self, StateDir};
use crate::{CmdResult, Done, ExpectedError};
use srt::bench::{self, Rate, Spec};

/// Arguments of `srt bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Deployment (default: the only one under the state directory).
    #[arg(value_parser = crate::deployment_name)]
    name: Option<String>,
    #[command(flatten)]
    dir: StateDir,
    /// Concurrency levels instead of the recipe's: `4x8`, `4,8` or `8`.
    #[arg(long, value_name = "LEVELS", value_parser = levels)]
    concurrencies: Option<Levels>,
    /// Requests per second within a level instead of the recipe's (`inf`: all at once).
    #[arg(long, value_name = "RATE", value_parser = rate)]
    request_rate: Option<Rate>,
    /// Requests measured per level, as a multiple of the level.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    num_prompts_mult: Option<u32>,
    /// Warm-up requests per level, as a multiple of the level (0: none).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    num_warmup_mult: Option<u32>,
    /// Seed of prompts, lengths and arrival times.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Print the run's result objects as JSON (one per level) instead of the table.
    #[arg(long)]
    json: bool,
}

/// Concurrency levels from the command line.
#[derive(Clone, Debug)]
struct Levels(Vec<u32>);

fn levels(s: &str) -> Result<Levels, String> {
    let v: Option<Vec<u32>> = s
        .split(['x', ','])
        .map(|p| {
            p.trim()
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=100_000).contains(n))
        })
        .collect();
    v.filter(|v| !v.is_empty())
        .map(Levels)
        .ok_or_else(|| format!("`{s}` is not a list of concurrency levels like 4x8 or 4,8"))
}

fn rate(s: &str) -> Result<Rate, String> {
    Rate::parse(s).ok_or_else(|| format!("`{s}` is not `inf` or a rate above 0"))
}

/// Run `srt bench`.
pub(crate) fn run(args: Args) -> CmdResult {
    let name = inspect::pick(&args.dir, args.name.clone())?;
    let (store, state) = inspect::load(&args.dir, &name)?;
    let Some(record) = state.resources.get("benchmark") else {
        return Err(ExpectedError::NotFound(format!(
            "deployment `{name}` has no benchmark: add `benchmark:` to its recipe and apply it"
        )));
    };
    if record.spec.get_str("type").as_deref() == Some("command") {
        return Err(ExpectedError::Usage(format!(
            "the benchmark of `{name}` is a command (`type: custom`): `srt apply --replace benchmark` runs it again"
        )));
    }
    let mut spec: Spec = serde_json::from_str(record.spec.as_str()).map_err(|e| {
        ExpectedError::Failed(format!(
            "the recorded benchmark of `{name}` is not readable by this srt ({e}): apply the recipe again"
        ))
    })?;
    if let Some(Levels(c)) = args.concurrencies {
        spec.concurrencies = c;
    }
    if let Some(r) = args.request_rate {
        spec.request_rate = r;
    }
    if let Some(n) = args.num_prompts_mult {
        spec.num_prompts_mult = n;
    }
    if let Some(n) = args.num_warmup_mult {
        spec.num_warmup_mult = n;
    }
    if let Some(s) = args.seed {
        spec.seed = s;
    }
    let requests: u64 = spec
        .concurrencies
        .iter()
        .map(|&c| u64::from(c) * u64::from(spec.num_prompts_mult + spec.num_warmup_mult))
        .sum();
    if requests > srt::recipe::limits::MAX_BENCHMARK_REQUESTS {
        return Err(ExpectedError::Usage(format!(
            "that run sends {requests} requests; srt sends at most {} per run",
            srt::recipe::limits::MAX_BENCHMARK_REQUESTS
        )));
    }
    let least = spec.least_seconds();
    if least > spec.max_duration_seconds as f64 {
        return Err(ExpectedError::Usage(format!(
            "at request rate {} that run's measured requests take at least {least:.0}s to send, more than the benchmark's bound of {}s (`benchmark.max_duration_seconds`): raise `--request-rate` or send fewer requests",
            spec.request_rate, spec.max_duration_seconds
        )));
    }
    // The executor that recorded the deployment knows where its public URL is.
    let exec = srt::workflow::executor_for_state(Default::default(), &name, store.dir(), &state);
    srt::workflow::restore(&*exec, &state)?;
    let spec = spec.resolved(|s| exec.bindings().resolve(s));
    let json = args.json;
    if !json {
        say!("Benchmarking {name}: {}", spec.describe());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let place = bench::Place {
        deployment_dir: store.dir(),
        deployment: &name,
    };
    let progress = |line: String| {
        if !json {
            say!("{line}");
        }
    };
    let result = rt.block_on(async {
        tokio::select! {
            r = bench::run(&spec, &place, &progress) => Ok(r),
            _ = tokio::signal::ctrl_c() => Err(spec.release().await.err()),
        }
    });
    let report = match result {
        Err(unreleased) => {
            return Err(ExpectedError::Cancelled(format!(
                "interrupted: the levels that finished are in the newest file of {}{}",
                store.dir().join(bench::result::DIR).display(),
                unreleased.map_or(String::new(), |e| format!("; {e}"))
            )))
        }
        Ok(r) => r.map_err(ExpectedError::Failed)?,
    };
    if json {
        for l in &report.levels {
            say_exact!("{l}");
        }
    } else {
        say_raw!("\n{}", bench::result::table(&report.levels));
        say!("Results: {}", report.file.display());
        if let Some(p) = &report.plot {
            say!("Plot: {}", p.display());
        }
    }
    report
        .check()
        .map_err(|e| ExpectedError::Failed(e.to_string()))?;
    Ok(Done::Ok)
}
