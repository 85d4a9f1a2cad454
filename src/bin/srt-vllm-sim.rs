//! `srt-vllm-sim`: a stand-in for `vllm serve` (see `srt::sim`).

fn main() {
    std::process::exit(srt::sim::main(std::env::args().skip(1).collect()))
}
