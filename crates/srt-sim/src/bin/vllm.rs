//! `srt-vllm-sim`: a stand-in for `vllm serve` (see the `srt_sim` library).

fn main() {
    std::process::exit(srt_sim::vllm::main(std::env::args().skip(1).collect()))
}
