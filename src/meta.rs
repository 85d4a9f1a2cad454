//! `srt completions` and `srt man`: generated from the clap definitions.

use crate::{Cli, CmdResult, Done};
use clap::CommandFactory;

/// Arguments of `srt completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// Shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Run `srt completions`.
pub(crate) fn completions(args: CompletionsArgs) -> CmdResult {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "srt", &mut out);
    let _ = std::io::Write::write_all(&mut std::io::stdout(), &out);
    Ok(Done::Ok)
}

/// The man page (roff) for `srt` and every subcommand.
pub fn man_page() -> String {
    let cmd = Cli::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut out)
        .expect("render man page");
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("srt-{}", sub.get_name());
        let sub = sub.clone().display_name(name);
        out.extend_from_slice(b"\n");
        clap_mangen::Man::new(sub)
            .render(&mut out)
            .expect("render man page");
    }
    String::from_utf8(out).expect("roff is UTF-8")
}

/// Run `srt man`.
pub(crate) fn man() -> CmdResult {
    say_raw!("{}", man_page());
    Ok(Done::Ok)
}

/// The recipe JSON Schema as pretty JSON (what `srt schema` prints and
/// `docs/recipe.schema.json` holds).
pub fn schema_text() -> String {
    let mut text =
        serde_json::to_string_pretty(&srt::schema::json_schema()).expect("schema serializes");
    text.push('\n');
    text
}

/// Run `srt schema`.
pub(crate) fn schema() -> CmdResult {
    say_exact!("{}", schema_text().trim_end());
    Ok(Done::Ok)
}
