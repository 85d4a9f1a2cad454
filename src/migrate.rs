//! `srt migrate`: an srtctl recipe file re-spelled in the 2.0 layout srt reads.

use crate::{CmdResult, Done, ExpectedError};
use srt::workflow::migrate::{verify, Outcome};
use std::path::PathBuf;

/// Arguments of `srt migrate`. An srtctl cluster file (`srtslurm.yaml`) is written as
/// srt's cluster profile (`srt-cluster.yaml`) instead.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The srtctl recipe (v1 or 2.0; a plain recipe or an override file).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Replace FILE with the migrated recipe (atomically) instead of printing it.
    #[arg(long, conflicts_with = "output")]
    write: bool,
    /// Write the migrated recipe to this file instead of printing it.
    #[arg(short = 'o', long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Check that the file and its migrated form give the same launch plan, for every
    /// recipe the file holds (an override file's base and variants); prints no recipe.
    #[arg(long, conflicts_with_all = ["write", "output"])]
    verify: bool,
    /// The cluster profile whose aliases and script directories `--verify` reads both
    /// recipes with, as `srt validate` reads them (default: `srt-cluster.yaml` here if
    /// present, else srtctl's `srtslurm.yaml` where srtctl finds it); unread without
    /// `--verify`, so that `SRT_CLUSTER` in the environment never gets in the way.
    #[arg(long, env = "SRT_CLUSTER", value_name = "FILE")]
    cluster: Option<PathBuf>,
}

/// Run `srt migrate`.
pub(crate) fn run(args: Args) -> CmdResult {
    let (source, unread) = srt::recipe::load::read_source(&args.file);
    if let Some(e) = unread {
        return Err(e.into());
    }
    if let Some(profile) = srt::cluster::srtslurm::profile_text(&source.text, &source.name) {
        let text = profile.map_err(|e| ExpectedError::from(srt::workflow::OpError::from(e)))?;
        if args.verify {
            return verify_profile(&source.text, &text);
        }
        return write_out(&args, &text);
    }
    let migrated = srt::recipe::srtctl::migrate_text(&source.text, &source.name)
        .map_err(|p| source.error(p))?;
    if args.verify {
        let profile = srt::workflow::cluster_profile(args.cluster.as_deref())?;
        return verify_all(&source, &migrated.text, &args.file, &profile);
    }
    for note in &migrated.notes {
        shout!("note: {note}");
    }
    if migrated.notes.is_empty() {
        shout!("{}: already in the 2.0 layout", source.name);
    }
    write_out(&args, &migrated.text)
}

/// Print `text`, or write it where the arguments say.
fn write_out(args: &Args, text: &str) -> CmdResult {
    let target = if args.write {
        Some(&args.file)
    } else {
        args.output.as_ref()
    };
    match target {
        Some(path) => srt::files::write_atomic(path, text.as_bytes())
            .map_err(|e| ExpectedError::Failed(format!("cannot write {}: {e}", path.display())))?,
        None => say_raw!("{}", text),
    }
    Ok(Done::Ok)
}

/// A cluster file and its written profile read as the same profile.
fn verify_profile(original: &str, written: &str) -> CmdResult {
    let read = |text: &str| srt::cluster::ClusterProfile::check(text).ok();
    if read(original).is_some() && read(original) == read(written) {
        say!("the cluster file and its profile read as the same profile");
        Ok(Done::Ok)
    } else {
        Err(ExpectedError::Failed(
            "the written profile does not read as the cluster file does".into(),
        ))
    }
}

fn verify_all(
    source: &srt::recipe::Source,
    migrated: &str,
    file: &std::path::Path,
    profile: &srt::cluster::ClusterProfile,
) -> CmdResult {
    let stem = srt::recipe::load::default_name(file);
    let checks = verify(source, migrated, &stem, profile)?;
    let mut failed = 0;
    for check in &checks {
        let label = if check.label.is_empty() {
            source.name.as_str()
        } else {
            check.label.as_str()
        };
        match &check.outcome {
            Outcome::Same => say!("{label}: same launch plan"),
            Outcome::Incomplete(error) => {
                let first = error
                    .problems
                    .iter()
                    .find(|p| !p.is_warning())
                    .map_or(String::new(), |p| format!(": {}", p.message));
                say!("{label}: not a recipe on its own, in either form (srtctl runs the variants, which complete it; the base only when selected){first}");
            }
            Outcome::Differs(diff) => {
                failed += 1;
                say!("{label}: the launch plans differ\n{diff}");
            }
            Outcome::Fails { original, error } => {
                failed += 1;
                let side = if *original {
                    "the original"
                } else {
                    "the migrated recipe"
                };
                say!("{label}: {side} does not give a launch plan");
                crate::report(error.as_ref());
            }
        }
    }
    if failed == 0 {
        Ok(Done::Ok)
    } else {
        Err(ExpectedError::Failed(format!(
            "{failed} of {} recipes do not verify",
            checks.len()
        )))
    }
}
