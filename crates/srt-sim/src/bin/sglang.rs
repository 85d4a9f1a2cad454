//! `srt-sglang-sim`: a stand-in for `python3 -m sglang.launch_server` (see the `srt_sim`
//! library).

fn main() {
    std::process::exit(srt_sim::sglang::main(std::env::args().skip(1).collect()))
}
