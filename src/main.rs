//! The `srt` binary: parse the command line and hand it to the library.

use clap::Parser;

/// See `srt_cli::alloc`.
#[global_allocator]
static ALLOC: srt_cli::alloc::Allocator = mimalloc::MiMalloc;

fn main() {
    srt_cli::alloc::configure();
    unset_empty_settings();
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

/// An `SRT_*` variable set to nothing (`SRT_CLUSTER= srt plan ...`) means unset, as it
/// does for most programs: clap would otherwise read it as an empty value and refuse
/// it. Done first, before any thread exists.
fn unset_empty_settings() {
    let empty: Vec<_> = std::env::vars_os()
        .filter(|(k, v)| v.is_empty() && k.to_string_lossy().starts_with("SRT_"))
        .map(|(k, _)| k)
        .collect();
    for k in empty {
        std::env::remove_var(k);
    }
}
