//! The `dynamo:` section (srtctl 2.0's): which planes the deployment's Dynamo programs
//! talk over, and the Dynamo they are.
//!
//! The request plane carries requests from the frontend to a worker: TCP (each worker
//! listens on a port srt allocates) or NATS. The event plane carries the workers' KV and
//! load events: ZMQ or NATS, or Dynamo's own default when unset. Either plane on NATS
//! makes the deployment run its own `nats-server`.

use super::super::OwnedSection;
use crate::recipe::diag::Problem;
use crate::recipe::keys::{k, Key};
use crate::recipe::{ArgValue, Recipe, Section};
use std::collections::BTreeMap;

/// The section's name.
pub(super) const NAME: &str = "dynamo";

/// The ai-dynamo release whose programs srt's catalogs were dumped from.
pub(super) const VERSION: &str = "1.6.1";

/// Its keys.
static KEYS: &[Key] = &[
    k(
        "request_plane",
        r#"{"enum": ["tcp", "nats"], "default": "tcp"}"#,
        "How the frontend reaches a worker: TCP (a port per worker) or NATS (the deployment's own nats-server).",
    ),
    k(
        "event_plane",
        r#"{"enum": ["nats", "zmq"]}"#,
        "How workers publish KV and load events (default: Dynamo's own, ZMQ with etcd discovery).",
    ),
    k(
        "version",
        r#"{"type": "string"}"#,
        "The ai-dynamo release: the one `install: true` installs (default 0.8.0, srtctl's), or with `install: false` the image's. srt checks commands against 1.6.1's catalogs: another release is a warning.",
    ),
    k(
        "install",
        r#"{"type": "boolean"}"#,
        "true: install ai-dynamo `version` with pip before each Dynamo program (frontend and workers), in its container where it has one, as srtctl does. false: run the ai-dynamo the program finds (`frontend.binary`, or `python3` on PATH). Default: false.",
    ),
    k(
        "hash",
        r#"{"type": "string", "pattern": "^[0-9a-f]{7,40}$"}"#,
        "A commit of ai-dynamo's repository: srt builds it from source before each Dynamo program (unless `install: false`), as srtctl does: once per run, into the run directory, and installs it with pip. The nodes must reach GitHub and the package indexes.",
    ),
    k(
        "top_of_tree",
        r#"{"not": {}}"#,
        "srtctl's build of Dynamo's HEAD: not supported (not reproducible); name the commit with `hash`.",
    ),
    k(
        "wheel",
        r#"{"type": "string"}"#,
        "An exact ai-dynamo release (srtctl stages its wheels before the job): srt installs it with pip before each Dynamo program, as `install: true` with that `version` (unless `install: false`), from PyPI and pypi.nvidia.com, which the nodes must reach.",
    ),
    k("cargo_patches", r#"{"not": {}}"#, "srtctl's source build of Dynamo: not supported."),
];

/// The section, for the schema and the key check.
pub(super) static SECTION: OwnedSection = OwnedSection {
    name: NAME,
    keys: KEYS,
};

/// A plane's transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Transport {
    Tcp,
    Nats,
    Zmq,
}

impl Transport {
    /// Its name on Dynamo's command lines.
    pub(super) fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Nats => "nats",
            Transport::Zmq => "zmq",
        }
    }
}

/// The planes of a deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Planes {
    /// The request plane: TCP or NATS.
    pub(super) request: Transport,
    /// The event plane, when the recipe chooses one.
    pub(super) event: Option<Transport>,
}

impl Planes {
    /// Whether the deployment needs NATS.
    pub(super) fn nats(&self) -> bool {
        self.request == Transport::Nats || self.event == Some(Transport::Nats)
    }

    /// The flags that put a Dynamo program on these planes, each with its value (none
    /// for Dynamo's defaults).
    pub(super) fn flags(&self) -> Vec<(&'static str, &'static str)> {
        let mut out = Vec::new();
        if self.request != Transport::Tcp {
            out.push(("--request-plane", self.request.name()));
        }
        if let Some(event) = self.event {
            out.push(("--event-plane", event.name()));
        }
        out
    }

    /// [`Self::flags`] of a worker whose environment is `env`. A wrapper reads
    /// `--request-plane` over [`REQUEST_PLANE_VAR`], which is only the flag's default, so a
    /// worker whose environment names the variable (a role's `env`, as srtctl's recipes
    /// set it) is given the flag even for Dynamo's default: it serves where the
    /// deployment's frontend looks, as under srtctl, which always passes the flag.
    pub(super) fn worker_flags(
        &self,
        env: &BTreeMap<String, String>,
    ) -> Vec<(&'static str, &'static str)> {
        let mut out = self.flags();
        if self.request == Transport::Tcp && env.contains_key(REQUEST_PLANE_VAR) {
            out.insert(0, ("--request-plane", self.request.name()));
        }
        out
    }
}

/// The variable Dynamo's wrappers take `--request-plane`'s default from.
pub(super) const REQUEST_PLANE_VAR: &str = "DYN_REQUEST_PLANE";

/// The recipe's planes (what [`check`] accepts; anything else reads as the default).
pub(super) fn planes(recipe: &Recipe) -> Planes {
    let section = recipe.sections.get(NAME);
    let written = |key: &str| match section.and_then(|s| s.get(key)).map(|a| &a.value) {
        Some(ArgValue::Str(s)) => Some(s.as_str()),
        _ => None,
    };
    let transport = |name: Option<&str>| match name {
        Some("nats") => Some(Transport::Nats),
        Some("zmq") => Some(Transport::Zmq),
        Some("tcp") => Some(Transport::Tcp),
        _ => None,
    };
    Planes {
        request: transport(written("request_plane")).unwrap_or(Transport::Tcp),
        event: transport(written("event_plane")),
    }
}

/// The values of the section: its keys were checked against [`KEYS`] already.
pub(super) fn check(recipe: &Recipe, problems: &mut Vec<Problem>) {
    let Some(section) = recipe.sections.get(NAME) else {
        return;
    };
    check_choice(section, "request_plane", &["tcp", "nats"], problems);
    check_choice(section, "event_plane", &["nats", "zmq"], problems);
    match (section.get("hash"), section.get("wheel")) {
        (Some(commit), _) => problems.extend(commit_problems(section, commit)),
        (None, Some(wheel)) => problems.extend(wheel_problems(section, wheel)),
        (None, None) => {
            if let Some(arg) = section.get("version") {
                if arg.value != ArgValue::Str(VERSION.into()) {
                    problems.push(version_problem(section, arg));
                }
            }
        }
    }
    for arg in &section.entries {
        let help = match arg.key.as_str() {
            "top_of_tree" => "a build of HEAD is another Dynamo each time it runs: name the commit with `hash: <sha>` (srt builds it), or a release with `version`",
            "cargo_patches" => "build that Dynamo into the container image and write `install: false`, or name a commit or release without patches",
            _ => continue,
        };
        problems.push(
            Problem::new(
                "srt::recipe::dynamo_install",
                arg.key_span,
                format!("srt does not support `dynamo.{}`", arg.key),
            )
            .label("not supported")
            .help(help),
        );
    }
}

/// What srt says of `hash` (a commit it builds before each Dynamo program): a commit
/// srt cannot check its commands against (a warning), which must be a commit id; a
/// `version` or `wheel` beside it is not what is installed (srtctl refuses a wheel
/// with it and clears the version); with `install: false` nothing is.
fn commit_problems(section: &Section, commit: &crate::recipe::Arg) -> Vec<Problem> {
    let id = commit.value.render();
    let mut out = Vec::new();
    let is_commit = matches!(&commit.value, ArgValue::Str(s)
        if (7..=40).contains(&s.len()) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
    if !is_commit {
        out.push(
            Problem::new(
                "srt::recipe::dynamo_source",
                commit.value_span,
                format!("`dynamo.hash` is `{id}`, not a commit id"),
            )
            .label("7 to 40 lowercase hex digits, quoted")
            .help("name the commit (`git rev-parse <ref>` in ai-dynamo's repository): a branch or tag is another Dynamo when it moves"),
        );
        return out;
    }
    if section.get("install").map(|a| &a.value) == Some(&ArgValue::Bool(false)) {
        out.push(
            Problem::warning(
                "srt::recipe::dynamo_source",
                commit.key_span,
                format!("`dynamo.hash` names commit {id}, and `install: false` builds nothing"),
            )
            .label("not built")
            .help(
                "the programs run the image's Dynamo; remove `install: false` to build this commit",
            ),
        );
        return out;
    }
    out.push(
        Problem::warning(
            "srt::recipe::dynamo_source",
            commit.value_span,
            format!("srt builds ai-dynamo at {id} from source before the Dynamo programs start, once per run"),
        )
        .label("cloned, built and installed on the nodes")
        .help(format!(
            "the nodes must reach GitHub and the package indexes (the first build takes minutes); \
             srt checks Dynamo's commands against ai-dynamo {VERSION}'s flags (`frontend.args` \
             against the newest release whose frontend takes them all)"
        )),
    );
    if let Some(wheel) = section.get("wheel") {
        out.push(
            Problem::new(
                "srt::recipe::dynamo_source",
                wheel.key_span,
                "`dynamo.wheel` and `dynamo.hash` both name the Dynamo to install",
            )
            .label("a second source")
            .help("keep one of them (srtctl refuses both too)"),
        );
    }
    out.extend(version_cleared(
        section,
        "srt::recipe::dynamo_source",
        "hash",
        "the Dynamo",
    ));
    out
}

/// A `version` beside `key` (`hash`, `wheel`), which names `what` is installed: not
/// installed, as srtctl clears it.
fn version_cleared(
    section: &Section,
    code: &'static str,
    key: &str,
    what: &str,
) -> Option<Problem> {
    let version = section.get("version")?;
    Some(
        Problem::warning(
            code,
            version.key_span,
            format!(
                "`dynamo.version` ({}) is not installed: `{key}` names {what}, as srtctl reads them",
                version.value.render()
            ),
        )
        .label(format!("cleared by `{key}`"))
        .help("remove one of them"),
    )
}

/// What srt says of srtctl's `wheel` (an exact release it stages before the job, and
/// installs): srt installs that release from the indexes instead; a `version` beside it
/// is not what is installed (srtctl clears it); with `install: false` nothing is.
fn wheel_problems(section: &Section, wheel: &crate::recipe::Arg) -> Vec<Problem> {
    let release = wheel.value.render();
    let mut out = Vec::new();
    if section.get("install").map(|a| &a.value) == Some(&ArgValue::Bool(false)) {
        out.push(
            Problem::warning(
                "srt::recipe::dynamo_wheel",
                wheel.key_span,
                format!("`dynamo.wheel` names ai-dynamo {release}, and `install: false` installs nothing"),
            )
            .label("not installed")
            .help("the programs run the image's Dynamo; remove `install: false` to install this release"),
        );
        return out;
    }
    out.push(
        Problem::warning(
            "srt::recipe::dynamo_wheel",
            wheel.value_span,
            format!(
                "srt installs ai-dynamo {release} with pip before each Dynamo program, from PyPI and pypi.nvidia.com; srtctl stages its wheels before the job"
            ),
        )
        .label("installed from the indexes on each node")
        .help(format!(
            "the nodes must reach the indexes; {}",
            checked_against(&release)
        )),
    );
    out.extend(version_cleared(
        section,
        "srt::recipe::dynamo_wheel",
        "wheel",
        "the release",
    ));
    out
}

/// A `version` other than the catalogs'. With `install` written (true: srt installs
/// that release; false: the image holds it) srt goes on and says which release it
/// checks the commands against. Without it the recipe is ambiguous: srtctl would
/// install the release, srt by default installs nothing.
fn version_problem(section: &Section, arg: &crate::recipe::Arg) -> Problem {
    let message = checked_against(&arg.value.render());
    let help = format!(
        "a flag of the release srt checks against that the running one lacks (or the reverse) shows only when the program starts; srt has the frontend's flags of ai-dynamo {}, the workers' wrappers' of {VERSION}",
        super::release::frontend_releases().join(", ")
    );
    match section.get("install").map(|a| &a.value) {
        Some(ArgValue::Bool(true)) => {
            Problem::warning("srt::recipe::dynamo_version", arg.value_span, message)
                .label("installed before each Dynamo program")
                .help(help)
        }
        Some(ArgValue::Bool(false)) => {
            Problem::warning("srt::recipe::dynamo_version", arg.value_span, message)
                .label("the image's Dynamo, as the recipe records it")
                .help(help)
        }
        _ => Problem::new(
            "srt::recipe::dynamo_version",
            arg.value_span,
            format!("`dynamo.version` is `{}`, and `dynamo.install` is not written", arg.value.render()),
        )
        .label("install it, or is it the image's?")
        .help(
            "write `install: true` to install this release before each Dynamo program (srtctl's default), \
             or `install: false` if the image holds it",
        ),
    }
}

/// A plane the recipe chooses whose flag the release's frontend lacks (ai-dynamo
/// 0.8's has no `--event-plane`): it would refuse the command srt gives it.
pub(super) fn check_planes_exist(
    recipe: &Recipe,
    catalog: &crate::catalog::Catalog,
    problems: &mut Vec<Problem>,
) {
    let Some(section) = recipe.sections.get(NAME) else {
        return;
    };
    for (flag, _) in planes(recipe).flags() {
        if super::release::has(catalog, flag) {
            continue;
        }
        let key = &flag[2..].replace('-', "_");
        let at = section.get(key).map_or(section.key_span, |a| a.value_span);
        problems.push(
            Problem::new(
                "srt::recipe::dynamo_plane",
                at,
                format!(
                    "ai-dynamo {}'s frontend has no `{flag}`: it runs Dynamo's default plane",
                    catalog.version
                ),
            )
            .label("not a flag of this release")
            .help("remove it, or name a release that has it (`dynamo.version`)"),
        );
    }
}

/// What srt checks a recipe's Dynamo commands against when it runs `release`.
fn checked_against(release: &str) -> String {
    use super::release::{frontend_catalog, Fit};
    let (catalog, fit) = frontend_catalog(Some(release));
    let of = &catalog.version;
    let registers = if super::registration::older_form(Some(release), "dynamo.vllm").is_some() {
        format!("; the workers register as {of}'s wrappers take it (`--store-kv`; `dynamo.vllm`'s namespace in `DYN_NAMESPACE`, its role as `--is-prefill-worker` or `--is-decode-worker`)")
    } else {
        String::new()
    };
    let checked = match fit {
        Fit::Same => format!(
            "srt checks `frontend.args` against ai-dynamo {of}'s flags, and the workers' wrapper flags against {VERSION}'s"
        ),
        Fit::Series => format!(
            "srt checks `frontend.args` against ai-dynamo {of}'s flags (the nearest release of `{release}`'s series it has), and the workers' wrapper flags against {VERSION}'s"
        ),
        Fit::Default => {
            format!("srt checks Dynamo's commands against ai-dynamo {VERSION}'s flags, not `{release}`'s")
        }
    };
    checked + &registers
}

/// `key`, when written, is one of `choices`.
fn check_choice(section: &Section, key: &str, choices: &[&str], problems: &mut Vec<Problem>) {
    let Some(arg) = section.get(key) else {
        return;
    };
    if let ArgValue::Str(s) = &arg.value {
        if choices.contains(&s.as_str()) {
            return;
        }
    }
    let mut problem = Problem::new(
        "srt::recipe::dynamo_plane",
        arg.value_span,
        format!(
            "`dynamo.{key}` is `{}`; ai-dynamo {VERSION} has {}",
            arg.value.render(),
            choices.join(" and ")
        ),
    )
    .label("not a plane of this Dynamo");
    problem = match arg.value.render().as_str() {
        "http" => problem.help(format!(
            "ai-dynamo {VERSION} has no HTTP request plane; use `tcp` or `nats`"
        )),
        _ => problem.help(format!("use one of: {}", choices.join(", "))),
    };
    problems.push(problem);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::{load_str, Source};

    fn recipe(section: &str) -> Recipe {
        let text = format!(
            "frontend:\n  type: dynamo\n{section}roles:\n  agg:\n    nodes: 1\n    workers: 1\n"
        );
        let source = Source {
            name: "t.yaml".into(),
            text,
        };
        load_str(&source, "t").expect("loads")
    }

    #[test]
    fn without_the_section_the_planes_are_dynamos_defaults_and_need_no_nats() {
        let planes = planes(&recipe(""));
        assert_eq!(
            planes,
            Planes {
                request: Transport::Tcp,
                event: None
            }
        );
        assert!(!planes.nats());
        assert!(planes.flags().is_empty());
    }

    #[test]
    fn a_worker_whose_env_names_the_request_plane_variable_gets_the_flag() {
        let env = BTreeMap::from([(REQUEST_PLANE_VAR.to_string(), "nats".to_string())]);
        let tcp = planes(&recipe(""));
        assert!(tcp.worker_flags(&BTreeMap::new()).is_empty());
        assert_eq!(tcp.worker_flags(&env), [("--request-plane", "tcp")]);
        let nats = planes(&recipe(
            "dynamo:\n  request_plane: nats\n  event_plane: zmq\n",
        ));
        assert_eq!(nats.worker_flags(&env), nats.flags());
    }

    #[test]
    fn either_plane_on_nats_needs_nats_and_is_on_the_command_line() {
        let request = planes(&recipe("dynamo:\n  request_plane: nats\n"));
        assert!(request.nats());
        assert_eq!(request.flags(), [("--request-plane", "nats")]);
        let event = planes(&recipe("dynamo:\n  event_plane: nats\n"));
        assert!(event.nats());
        assert_eq!(event.flags(), [("--event-plane", "nats")]);
        let zmq = planes(&recipe(
            "dynamo:\n  request_plane: tcp\n  event_plane: zmq\n",
        ));
        assert!(!zmq.nats());
        assert_eq!(zmq.flags(), [("--event-plane", "zmq")]);
    }

    #[test]
    fn accepted_values_raise_nothing_and_others_are_located() {
        let mut problems = Vec::new();
        check(
            &recipe("dynamo:\n  request_plane: nats\n  event_plane: zmq\n  version: \"1.6.1\"\n  install: false\n"),
            &mut problems,
        );
        assert!(problems.is_empty(), "{problems:?}");
        check(
            &recipe("dynamo:\n  event_plane: tcp\n  install: true\n  top_of_tree: true\n"),
            &mut problems,
        );
        let codes: Vec<&str> = problems.iter().map(|p| p.code).collect();
        assert_eq!(
            codes,
            ["srt::recipe::dynamo_plane", "srt::recipe::dynamo_install"]
        );
    }

    /// What a recipe with `section` installs, and the codes (and warning-ness) of what
    /// [`check`] says of it.
    fn with(
        section: &str,
    ) -> (
        Option<super::super::install::Install>,
        Vec<(&'static str, bool)>,
    ) {
        let r = recipe(section);
        let mut problems = Vec::new();
        check(&r, &mut problems);
        let codes = problems.iter().map(|p| (p.code, p.is_warning())).collect();
        (super::super::install::install(&r), codes)
    }

    #[test]
    fn a_wheel_is_its_release_installed_from_the_indexes() {
        use super::super::install::Install::Release;
        let note = ("srt::recipe::dynamo_wheel", true);
        assert_eq!(
            with("dynamo:\n  wheel: \"1.2.0.dev20260426\"\n"),
            (Some(Release("1.2.0.dev20260426".into())), vec![note])
        );
        assert_eq!(
            with("dynamo:\n  version: \"0.8.0\"\n  wheel: \"1.2.0.dev1\"\n  install: true\n"),
            (Some(Release("1.2.0.dev1".into())), vec![note, note])
        );
        assert_eq!(
            with("dynamo:\n  wheel: \"1.2.0.dev1\"\n  install: false\n"),
            (None, vec![note])
        );
    }

    #[test]
    fn a_commit_is_built_unless_install_is_false_and_must_be_a_commit_id() {
        use super::super::install::Install::Commit;
        let note = ("srt::recipe::dynamo_source", true);
        let refusal = ("srt::recipe::dynamo_source", false);
        let sha = "81d0555ee23519cea80a42b4fe824e30368b7300";
        assert_eq!(
            with(&format!("dynamo:\n  install: true\n  hash: \"{sha}\"\n")),
            (Some(Commit(sha.into())), vec![note])
        );
        // srtctl's default is to install: a commit named is a commit built.
        assert_eq!(
            with("dynamo:\n  hash: 39d2a68\n"),
            (Some(Commit("39d2a68".into())), vec![note])
        );
        assert_eq!(
            with("dynamo:\n  hash: 39d2a68\n  install: false\n"),
            (None, vec![note])
        );
        // The version is cleared (srtctl's reading); a wheel is a second source.
        assert_eq!(
            with("dynamo:\n  hash: 39d2a68\n  version: \"0.8.0\"\n  wheel: \"1.2.0\"\n").1,
            vec![note, refusal, note]
        );
        for moving in ["main", "v1.6.1", "39D2A68", "39d2a6"] {
            let (_, codes) = with(&format!("dynamo:\n  hash: {moving}\n"));
            assert_eq!(codes, vec![refusal], "{moving}");
        }
    }

    #[test]
    fn another_release_is_a_warning_once_install_says_whose_it_is() {
        for (install, warning) in [
            ("  install: true\n", true),
            ("  install: false\n", true),
            ("", false),
        ] {
            let mut problems = Vec::new();
            check(
                &recipe(&format!("dynamo:\n  version: \"0.8.1\"\n{install}")),
                &mut problems,
            );
            assert_eq!(problems.len(), 1, "{install}: {problems:?}");
            assert_eq!(problems[0].code, "srt::recipe::dynamo_version");
            assert_eq!(problems[0].is_warning(), warning, "{install}: {problems:?}");
        }
    }
}
