//! `srt-rank-sim`: a stand-in for an MPI launcher's rank dispatch (TensorRT-LLM's
//! `trtllm-llmapi-launch`) under `--simulate`. Each rank of an MPI job runs it with the
//! command to serve: rank 0 becomes that command, every other rank waits, as the
//! engine's MPI workers wait for rank 0's work, until it is stopped (SIGTERM ends it).
//! The rank is the first of `SLURM_PROCID`, `OMPI_COMM_WORLD_RANK`, `PMIX_RANK` and
//! `PMI_RANK` that is set; none (a process of one task) is rank 0.

use std::os::unix::process::CommandExt;

/// The variables a launcher gives each rank its number in, in the order looked up.
const RANK_VARS: [&str; 4] = [
    "SLURM_PROCID",
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "PMI_RANK",
];

fn rank() -> u32 {
    RANK_VARS
        .iter()
        .find_map(|v| std::env::var(v).ok())
        .and_then(|r| r.trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some((program, args)) = argv.split_first() else {
        eprintln!("usage: srt-rank-sim PROGRAM [ARG]...");
        std::process::exit(2);
    };
    let rank = rank();
    if rank == 0 {
        let error = std::process::Command::new(program).args(args).exec();
        eprintln!("srt-rank-sim: cannot run {program}: {error}");
        std::process::exit(127);
    }
    eprintln!(
        "srt-rank-sim: rank {rank} waits for rank 0 (pid {})",
        std::process::id()
    );
    loop {
        std::thread::park();
    }
}
