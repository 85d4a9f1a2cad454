//! The `srt` binary: parse the command line and hand it to the library.

use clap::Parser;

/// See `srt_cli::alloc`.
#[global_allocator]
static ALLOC: srt_cli::alloc::Allocator = mimalloc::MiMalloc;

fn main() {
    srt_cli::alloc::configure();
    let cli = match srt_cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                srt::exit::USAGE
            } else {
                srt::exit::OK
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    std::process::exit(srt_cli::run(cli));
}
