//! Which ai-dynamo release a recipe runs, and the frontend catalog its
//! `frontend.args` are read with: srt has the frontend's flags of several releases
//! (dumped from each one's parser); the workers' wrapper flags are 1.6.1's.

use super::install::DEFAULT_RELEASE;
use super::section::NAME;
use crate::catalog::Catalog;
use crate::recipe::{ArgValue, Recipe};

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

/// The recipe's frontend catalog.
pub(super) fn of(recipe: &Recipe) -> &'static Catalog {
    frontend_catalog(named(recipe).as_deref()).0
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
