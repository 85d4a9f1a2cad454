//! Which ai-dynamo release a recipe runs, and the frontend catalog its
//! `frontend.args` are read with: srt has the frontend's flags of several releases
//! (dumped from each one's parser); the workers' wrapper flags are 1.6.1's.

use super::install::DEFAULT_RELEASE;
use super::section::NAME;
use crate::catalog::Catalog;
use crate::recipe::{ArgValue, Problem, Recipe};

/// The frontend's catalogs, newest (srt's default, `section::VERSION`) first.
const FRONTEND: &[(&str, &str)] = &[
    ("1.6.1", include_str!("catalog/dynamo-frontend-1.6.1.json")),
    ("1.3.1", include_str!("catalog/dynamo-frontend-1.3.1.json")),
    ("1.2.1", include_str!("catalog/dynamo-frontend-1.2.1.json")),
    ("1.1.0", include_str!("catalog/dynamo-frontend-1.1.0.json")),
    ("0.9.1", include_str!("catalog/dynamo-frontend-0.9.1.json")),
    ("0.8.1", include_str!("catalog/dynamo-frontend-0.8.1.json")),
    ("0.8.0", include_str!("catalog/dynamo-frontend-0.8.0.json")),
];

fn frontends() -> &'static [Catalog] {
    static PARSED: std::sync::OnceLock<Vec<Catalog>> = std::sync::OnceLock::new();
    PARSED.get_or_init(|| crate::catalog::parse_shipped(FRONTEND))
}

/// The frontend's catalog of srt's default release.
pub(super) fn default() -> &'static Catalog {
    &frontends()[0]
}

/// The release a recipe names: srtctl's `wheel`, else `version`, else srtctl's
/// default when it installs one; none for a commit (`hash`) or the image's unnamed
/// release.
pub(super) fn named(recipe: &Recipe) -> Option<String> {
    let section = recipe.sections.get(NAME)?;
    if section.get("hash").is_some() {
        return None;
    }
    let text = |key: &str| section.get(key).map(|a| a.value.render());
    text("wheel").or_else(|| text("version")).or_else(|| {
        (section.get("install").map(|a| &a.value) == Some(&ArgValue::Bool(true)))
            .then(|| DEFAULT_RELEASE.to_string())
    })
}

/// How a catalog stands for a release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fit {
    /// Its own (or its post release's base).
    Same,
    /// The newest srt has of the same minor series (a development build, a patch).
    Series,
    /// None of its series: srt's default.
    Default,
}

/// The frontend catalog for `release` (srt's default when none is named), and how it
/// stands for it.
pub(super) fn frontend_catalog(release: Option<&str>) -> (&'static Catalog, Fit) {
    let all = frontends();
    let Some(release) = release else {
        return (&all[0], Fit::Same);
    };
    let base = release.split(".post").next().unwrap_or(release);
    if let Some(c) = all
        .iter()
        .find(|c| c.version == release || c.version == base)
    {
        return (c, Fit::Same);
    }
    let series = |v: &str| v.split('.').take(2).collect::<Vec<_>>().join(".");
    match all.iter().find(|c| series(&c.version) == series(release)) {
        Some(c) => (c, Fit::Series),
        None => (&all[0], Fit::Default),
    }
}

/// The recipe's frontend catalog: the named release's; for a commit or an image that
/// names none, the newest whose frontend takes every flag of `frontend.args` (srt's
/// default when none does, or the recipe writes none), as an SGLang image that names
/// no release is read.
pub(super) fn of(recipe: &Recipe) -> &'static Catalog {
    match named(recipe) {
        Some(release) => frontend_catalog(Some(&release)).0,
        None => unnamed(recipe),
    }
}

/// The catalog of a recipe that names no release: see [`of`].
fn unnamed(recipe: &Recipe) -> &'static Catalog {
    frontends()
        .iter()
        .find(|c| takes_all(c, recipe))
        .unwrap_or_else(default)
}

/// Whether the frontend of `catalog`'s release parses every flag of `frontend.args`.
fn takes_all(catalog: &Catalog, recipe: &Recipe) -> bool {
    recipe
        .frontend
        .args
        .0
        .iter()
        .all(|a| takes(catalog, &a.key))
}

/// Whether the frontend of `catalog`'s release parses `flag` (in full, or as the
/// abbreviation its parser reads).
fn takes(catalog: &Catalog, flag: &str) -> bool {
    matches!(
        catalog.resolve(flag),
        crate::catalog::Resolution::Exact(..) | crate::catalog::Resolution::Prefix(..)
    )
}

/// What srt says when a recipe that names no release has `frontend.args` srt's default
/// frontend lacks, and an older one of its catalogs takes them all: which it reads them
/// with. Located at the first flag the default lacks.
pub(super) fn unnamed_note(recipe: &Recipe) -> Option<Problem> {
    if named(recipe).is_some() {
        return None;
    }
    let chosen = unnamed(recipe);
    let newest = default();
    if std::ptr::eq(chosen, newest) {
        return None;
    }
    let first = recipe
        .frontend
        .args
        .0
        .iter()
        .find(|a| !takes(newest, &a.key))?;
    let (source, help) = match recipe.sections.get(NAME).and_then(|s| s.get("hash")) {
        Some(hash) => (
            format!("commit {} names no release", hash.value.render()),
            "srt cannot tell the release a commit belongs to: a flag its frontend lacks shows only when it starts",
        ),
        None => (
            "the image's Dynamo names no release".to_string(),
            "write `dynamo.version` (with `install: false`) to name the release the image holds",
        ),
    };
    Some(
        Problem::warning(
            "srt::recipe::dynamo_version",
            first.key_span,
            format!(
                "{source}, and `frontend.args` has flags ai-dynamo {}'s frontend does not: srt checks them against {}, the newest release it has whose frontend takes them all",
                newest.version, chosen.version
            ),
        )
        .label(format!("not a flag of {}", newest.version))
        .help(help),
    )
}

/// Whether the frontend of `catalog`'s release has `flag` (`--name`).
pub(super) fn has(catalog: &Catalog, flag: &str) -> bool {
    matches!(
        catalog.resolve(flag.trim_start_matches('-')),
        crate::catalog::Resolution::Exact(..)
    )
}

/// The releases srt has the frontend's flags of, newest first.
pub(super) fn frontend_releases() -> Vec<&'static str> {
    frontends().iter().map(|c| c.version.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::super::section::VERSION;
    use super::*;
    use crate::recipe::{load_str, Source};

    fn recipe(dynamo: &str, args: &str) -> Recipe {
        let text = format!(
            "frontend:\n  type: dynamo\n  args: {{{args}}}\ndynamo: {{{dynamo}}}\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n"
        );
        load_str(
            &Source {
                name: "t.yaml".into(),
                text,
            },
            "t",
        )
        .expect("loads")
    }

    /// A commit (or an image) names no release: `frontend.args` are read with the newest
    /// catalog that takes them all, and srt says so when that is not its default.
    #[test]
    fn an_unnamed_release_is_read_with_the_newest_frontend_that_takes_its_args() {
        let commit = "hash: \"0b33c1dfa0c1c88b4c728e600aa62a1be594b0c6\"";
        let older = recipe(commit, "router-reset-states: true");
        assert_eq!(of(&older).version, "1.3.1");
        let note = unnamed_note(&older).expect("said");
        assert!(
            note.message
                .contains("commit 0b33c1dfa0c1c88b4c728e600aa62a1be594b0c6 names no release")
                && note.message.contains("against 1.3.1"),
            "{}",
            note.message
        );
        let current = recipe(commit, "router-mode: kv");
        assert_eq!(of(&current).version, VERSION);
        assert!(unnamed_note(&current).is_none());
        // No catalog takes it: srt's default, whose check refuses the flag.
        let none = recipe(commit, "no-such-flag: true");
        assert_eq!(of(&none).version, VERSION);
        assert!(unnamed_note(&none).is_none());
        let image = recipe("install: false", "router-reset-states: true");
        assert_eq!(of(&image).version, "1.3.1");
        let note = unnamed_note(&image).expect("said").message;
        assert!(
            note.contains("the image's Dynamo names no release"),
            "{note}"
        );
        // A named release is its own, whatever the flags.
        let named = recipe(
            "version: \"1.6.1\", install: true",
            "router-reset-states: true",
        );
        assert_eq!(of(&named).version, "1.6.1");
        assert!(unnamed_note(&named).is_none());
    }

    #[test]
    fn a_release_is_read_with_its_own_catalog_or_its_series_newest() {
        let version = |r: Option<&str>| {
            let (c, fit) = frontend_catalog(r);
            (c.version.as_str(), fit)
        };
        assert_eq!(version(None), (VERSION, Fit::Same));
        assert_eq!(version(Some("1.3.1")), ("1.3.1", Fit::Same));
        assert_eq!(version(Some("0.8.0")), ("0.8.0", Fit::Same));
        assert_eq!(version(Some("1.3.0.dev1")), ("1.3.1", Fit::Series));
        assert_eq!(version(Some("1.3.0.post1")), ("1.3.1", Fit::Series));
        assert_eq!(version(Some("0.8.1.post3")), ("0.8.1", Fit::Same));
        assert_eq!(version(Some("1.2.0.dev20260526")), ("1.2.1", Fit::Series));
        assert_eq!(version(Some("1.0.2")), (VERSION, Fit::Default));
        assert_eq!(frontend_releases()[0], VERSION);
    }

    #[test]
    fn older_frontends_lack_flags_srt_sets_on_newer_ones() {
        let of = |v: &str| frontend_catalog(Some(v)).0;
        for flag in ["--discovery-backend", "--migration-limit"] {
            assert!(!has(of("0.8.0"), flag), "{flag}");
            assert!(has(of("1.1.0"), flag), "{flag}");
        }
        assert!(has(of("1.3.1"), "--router-reset-states"));
        assert!(!has(of(VERSION), "--router-reset-states"));
    }

    #[test]
    fn the_catalogs_say_their_release() {
        let mut seen: Vec<&str> = frontend_releases();
        seen.dedup();
        assert_eq!(seen.len(), FRONTEND.len());
        assert!(frontends()
            .iter()
            .all(|c| c.command == ["python3", "-m", "dynamo.frontend"]));
    }
}
