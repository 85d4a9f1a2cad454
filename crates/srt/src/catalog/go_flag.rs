//! Go's `flag` package's reading of a command line (etcd, nats-server), as
//! `scripts/go-flag-catalog.py` verified it against the real programs: `-name` and
//! `--name` are one flag; a value is the next word or follows `=`; a bool flag is
//! `-name` or `-name=false`, never `-name false`; names match exactly (no prefixes, no
//! `_`/`-` equivalence); parsing stops at `--` or the first word that is not a flag.

use super::{Catalog, OptionSpec, Resolution};

/// Resolve `name` (without dashes) as Go does: exactly, whichever dashes the catalog
/// wrote the flag with.
pub(super) fn resolve<'c>(catalog: &'c Catalog, name: &str) -> Resolution<'c> {
    match find(catalog, name) {
        Some((o, f)) => Resolution::Exact(o, f),
        None => Resolution::Unknown,
    }
}

fn find<'c>(catalog: &'c Catalog, name: &str) -> Option<(&'c OptionSpec, &'c str)> {
    catalog
        .exact(&format!("--{name}"))
        .or_else(|| catalog.exact(&format!("-{name}")))
}

/// Read `argv` as Go's `flag.Parse` does; the options seen (by their long name) or the
/// first problem, in Go's words.
pub(super) fn parse_argv(catalog: &Catalog, argv: &[String]) -> Result<Vec<String>, String> {
    let mut seen = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let token = &argv[i];
        if token == "--" {
            i += 1;
            break;
        }
        let Some(body) = flag_body(token)? else {
            break;
        };
        i += 1;
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (body, None),
        };
        let Some((spec, _)) = find(catalog, name) else {
            return Err(format!("flag provided but not defined: -{name}"));
        };
        seen.push(spec.name().to_string());
        if !spec.takes_value {
            check_bool(name, inline)?;
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => {
                let v = argv
                    .get(i)
                    .ok_or_else(|| format!("flag needs an argument: -{name}"))?;
                i += 1;
                v.as_str()
            }
        };
        spec.check_value(&format!("-{name}"), value)?;
    }
    let rest: Vec<&str> = argv[i..].iter().map(String::as_str).collect();
    catalog.check_positionals(&rest)?;
    Ok(seen)
}

/// The flag a word names, with its value if attached (`name` or `name=value`); `None`
/// for a word that is not a flag (where Go stops reading flags).
fn flag_body(token: &str) -> Result<Option<&str>, String> {
    let body = match token.strip_prefix("--").or_else(|| token.strip_prefix('-')) {
        Some(b) if !b.is_empty() => b,
        _ => return Ok(None),
    };
    if body.starts_with('-') || body.starts_with('=') {
        return Err(format!("bad flag syntax: {token}"));
    }
    Ok(Some(body))
}

/// A bool flag's attached value, as Go's `strconv.ParseBool` reads it.
fn check_bool(name: &str, inline: Option<&str>) -> Result<(), String> {
    const WORDS: [&str; 12] = [
        "1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False",
    ];
    match inline {
        Some(v) if !WORDS.contains(&v) => Err(format!(
            "invalid boolean value {v:?} for -{name}: parse error"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{render, Resolution, Syntax};
    use super::*;
    use crate::recipe::diag::did_you_mean;
    use crate::recipe::ArgValue;

    fn etcd() -> Catalog {
        Catalog::parse(include_str!("../frontend/dynamo/catalog/etcd-3.4.23.json")).unwrap()
    }

    fn nats() -> Catalog {
        Catalog::parse(include_str!(
            "../frontend/dynamo/catalog/nats-server-2.9.10.json"
        ))
        .unwrap()
    }

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn the_catalogs_name_go_flag_syntax() {
        assert_eq!(etcd().syntax, Syntax::GoFlag);
        assert_eq!(nats().syntax, Syntax::GoFlag);
    }

    #[test]
    fn one_dash_and_two_are_the_same_flag() {
        let n = nats();
        for spelling in ["-p 4222", "--p 4222", "-port 4222", "--port=4222"] {
            assert_eq!(n.parse_argv(&argv(spelling)), Ok(vec!["port".into()]));
        }
        assert!(matches!(n.resolve("p"), Resolution::Exact(_, "-p")));
        assert!(matches!(n.resolve("port"), Resolution::Exact(_, "--port")));
        assert_eq!(
            etcd().parse_argv(&argv("-data-dir /d --name n")),
            Ok(vec!["data-dir".into(), "name".into()])
        );
    }

    #[test]
    fn a_bool_flag_takes_a_value_only_after_equals() {
        let e = etcd();
        assert!(e.parse_argv(&argv("--auto-tls=false")).is_ok());
        let err = e.parse_argv(&argv("--auto-tls=yes")).unwrap_err();
        assert!(err.contains("invalid boolean value"), "{err}");
        // `-x false`: the bool is set and `false` stops the flags, an extra argument.
        let err = e.parse_argv(&argv("--auto-tls false")).unwrap_err();
        assert!(err.contains("unrecognized arguments: false"), "{err}");
    }

    #[test]
    fn a_typed_flag_needs_a_value() {
        let err = etcd().parse_argv(&argv("--data-dir")).unwrap_err();
        assert_eq!(err, "flag needs an argument: -data-dir");
        // The next word is the value, whatever it looks like.
        assert!(etcd().parse_argv(&argv("--name --data-dir")).is_ok());
    }

    #[test]
    fn abbreviations_and_unknown_flags_are_refused_with_a_suggestion() {
        let e = etcd();
        assert_eq!(e.resolve("data-di"), Resolution::Unknown);
        assert_eq!(e.resolve("data_dir"), Resolution::Unknown);
        let err = e.parse_argv(&argv("--data-di /d")).unwrap_err();
        assert_eq!(err, "flag provided but not defined: -data-di");
        assert_eq!(did_you_mean("data-dri", e.long_names()), Some("data-dir"));
        let n = nats();
        assert_eq!(n.resolve("jetstrem"), Resolution::Unknown);
        assert_eq!(did_you_mean("jetstrem", n.long_names()), Some("jetstream"));
    }

    #[test]
    fn renders_every_value_attached() {
        let e = etcd();
        let flags = [
            ("data-dir".to_string(), ArgValue::Str("/d".into())),
            ("auto-tls".to_string(), ArgValue::Bool(true)),
            ("client-cert-auth".to_string(), ArgValue::Bool(false)),
            ("name".to_string(), ArgValue::Str("-n".into())),
        ];
        let tokens = render(Some(&e), &flags);
        assert_eq!(
            tokens,
            [
                "--data-dir=/d",
                "--auto-tls",
                "--client-cert-auth=false",
                "--name=-n"
            ]
        );
        assert!(e.parse_argv(&tokens).is_ok());
    }
}
