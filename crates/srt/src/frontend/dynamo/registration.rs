//! How a worker registers under the ai-dynamo release a recipe names.
//!
//! srt's registration flags are those of ai-dynamo 1.0.0 and later (1.6.1's catalogs):
//! `--endpoint dyn://<namespace>.<component>.generate`, `--discovery-backend etcd`,
//! `--disaggregation-mode <role>`. The wrappers of 0.8 and 0.9 register otherwise, and
//! parse their command lines strictly, so those flags would stop the worker at startup:
//! their key-value store is `--store-kv` (no `--discovery-backend`), and
//! `dynamo.vllm`'s namespace is the variable `DYN_NAMESPACE` (no `--endpoint`) and its
//! role `--is-prefill-worker` / `--is-decode-worker` (no `--disaggregation-mode`). Which
//! flags each release's wrappers take is `registration.json` (beside this file), read from
//! the releases' wheels by `scripts/dynamo-registration.py`.

use super::release::{frontend_catalog, Fit};
use std::collections::{BTreeMap, BTreeSet};

/// The registration flags a wrapper takes.
type Takes = BTreeSet<String>;

/// Each release's wrappers' registration flags, by release and wrapper module.
fn shipped() -> &'static BTreeMap<String, BTreeMap<String, Takes>> {
    static PARSED: std::sync::OnceLock<BTreeMap<String, BTreeMap<String, Takes>>> =
        std::sync::OnceLock::new();
    PARSED.get_or_init(|| {
        let text = include_str!("registration.json");
        let json: serde_json::Value =
            serde_json::from_str(text).expect("the shipped catalog parses");
        json["releases"]
            .as_object()
            .expect("releases")
            .iter()
            .map(|(release, entry)| {
                let wrappers = entry
                    .as_object()
                    .expect("a release's entry")
                    .iter()
                    .filter_map(|(module, flags)| {
                        let flags = flags.as_array()?.iter();
                        Some((
                            module.clone(),
                            flags.filter_map(|f| f.as_str()).map(String::from).collect(),
                        ))
                    })
                    .collect();
                (release.clone(), wrappers)
            })
            .collect()
    })
}

/// The flags `module`'s wrapper (`dynamo.vllm`) takes in `release` when that release
/// registers in the older form (no `--discovery-backend`): the release srt reads the
/// recipe's frontend with, when it has that one or its series. `None` for srt's form
/// (1.0.0 and later, a commit, an unnamed release, a series srt has none of).
pub(super) fn older_form(release: Option<&str>, module: &str) -> Option<&'static Takes> {
    let (catalog, fit) = frontend_catalog(release);
    if release.is_none() || fit == Fit::Default {
        return None;
    }
    let takes = shipped().get(&catalog.version)?.get(module)?;
    (!takes.contains("--discovery-backend")).then_some(takes)
}

/// What a worker is given instead of srt's registration.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Older {
    /// Its command-line words.
    pub words: Vec<String>,
    /// Its variables.
    pub env: Vec<(String, String)>,
}

/// `registration` (srt's flags and values) in the older form `takes`, for a worker of
/// `namespace`: a flag the wrapper takes as it is; `--endpoint` as `DYN_NAMESPACE`
/// (the wrapper names its component after its role); `--discovery-backend` as
/// `--store-kv`; `--disaggregation-mode` as `--is-prefill-worker` or
/// `--is-decode-worker` where the wrapper has them (an aggregated worker has neither),
/// else as its engine's own flag, which the engine renders. A flag with no older form
/// is an error, never dropped.
pub(super) fn older(
    takes: &Takes,
    registration: &[(&str, &str)],
    namespace: &str,
) -> Result<Older, String> {
    let mut out = Older::default();
    for &(flag, value) in registration {
        let has = |f: &str| takes.contains(f);
        match flag {
            _ if has(flag) => out.words.extend([flag.to_string(), value.to_string()]),
            "--endpoint" => out.env.push(("DYN_NAMESPACE".into(), namespace.into())),
            "--discovery-backend" if has("--store-kv") => {
                out.words
                    .extend(["--store-kv".to_string(), value.to_string()]);
            }
            "--disaggregation-mode" if has("--is-prefill-worker") => {
                let role = match value {
                    "prefill" => Some("--is-prefill-worker"),
                    "decode" => Some("--is-decode-worker"),
                    _ => None,
                };
                out.words.extend(role.map(String::from));
            }
            "--disaggregation-mode" => {}
            _ => {
                return Err(format!(
                    "this release's wrapper has no `{flag}`, nor an older form of it"
                ))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Resolution;

    fn srt_form(mode: &'static str) -> Vec<(&'static str, &'static str)> {
        vec![
            ("--endpoint", "dyn://d.prefill.generate"),
            ("--discovery-backend", "etcd"),
            ("--disaggregation-mode", mode),
            ("--request-plane", "nats"),
        ]
    }

    #[test]
    fn releases_before_1_0_register_in_the_older_form_and_later_ones_in_srts() {
        for release in ["0.8.0", "0.8.1", "0.8.1.post2", "0.9.1"] {
            for module in [
                "dynamo.vllm",
                "dynamo.sglang",
                "dynamo.trtllm",
                "dynamo.mocker",
            ] {
                assert!(
                    older_form(Some(release), module).is_some(),
                    "{release} {module}"
                );
            }
        }
        for release in [None, Some("1.1.0"), Some("1.6.1"), Some("2.0.0")] {
            assert!(older_form(release, "dynamo.vllm").is_none(), "{release:?}");
        }
    }

    #[test]
    fn vllm_0_8_takes_its_namespace_from_the_environment_and_its_role_from_a_switch() {
        let takes = older_form(Some("0.8.0"), "dynamo.vllm").unwrap();
        let prefill = older(takes, &srt_form("prefill"), "d").unwrap();
        assert_eq!(
            prefill.words,
            [
                "--store-kv",
                "etcd",
                "--is-prefill-worker",
                "--request-plane",
                "nats"
            ]
        );
        assert_eq!(
            prefill.env,
            [("DYN_NAMESPACE".to_string(), "d".to_string())]
        );
        let agg = older(takes, &srt_form("agg"), "d").unwrap();
        assert_eq!(agg.words, ["--store-kv", "etcd", "--request-plane", "nats"]);
    }

    #[test]
    fn sglang_and_trtllm_0_8_keep_their_endpoint_and_read_the_store_as_store_kv() {
        let sglang = older(
            older_form(Some("0.8.1"), "dynamo.sglang").unwrap(),
            &srt_form("decode"),
            "d",
        );
        assert_eq!(
            sglang.unwrap().words,
            [
                "--endpoint",
                "dyn://d.prefill.generate",
                "--store-kv",
                "etcd",
                "--request-plane",
                "nats"
            ]
        );
        let trtllm = older(
            older_form(Some("0.9.1"), "dynamo.trtllm").unwrap(),
            &srt_form("decode"),
            "d",
        );
        assert_eq!(
            trtllm.unwrap().words,
            [
                "--endpoint",
                "dyn://d.prefill.generate",
                "--store-kv",
                "etcd",
                "--disaggregation-mode",
                "decode",
                "--request-plane",
                "nats"
            ]
        );
    }

    #[test]
    fn a_flag_with_no_older_form_is_an_error() {
        let takes = older_form(Some("0.8.0"), "dynamo.vllm").unwrap();
        let error = older(takes, &[("--event-plane", "zmq")], "d").unwrap_err();
        assert!(error.contains("--event-plane"), "{error}");
    }

    /// The catalog is read from the wheels' source, not from running parsers: for 1.6.1,
    /// whose wrappers srt has the running parsers' catalogs of, both agree on every
    /// recorded flag but one: the shared argument group that declares
    /// `--disaggregation-mode` is not `dynamo.sglang`'s, which leaves it to SGLang.
    #[test]
    fn the_source_read_agrees_with_the_running_1_6_1_parsers() {
        let entry = &shipped()["1.6.1"];
        let json: serde_json::Value =
            serde_json::from_str(include_str!("registration.json")).unwrap();
        for catalog in super::super::catalogs() {
            let Some(module) = catalog.command.last().filter(|m| entry.contains_key(*m)) else {
                continue;
            };
            for flag in json["flags"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|f| f.as_str())
            {
                let running = matches!(catalog.resolve(&flag[2..]), Resolution::Exact(..));
                let read = entry[module].contains(flag);
                let shared_group = module == "dynamo.sglang" && flag == "--disaggregation-mode";
                assert_eq!(read && !shared_group, running, "{module} {flag}");
            }
        }
    }
}
