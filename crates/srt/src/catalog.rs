//! Flag catalogs of the real programs srt launches, and argparse's way of reading a
//! command line.
//!
//! A catalog is the JSON dump of a program's own argparse parser (every option string,
//! whether it takes a value, `nargs`, type, choices), made by `scripts/flag-catalogs.sh`
//! from the pinned release and checked in next to the engine or frontend that launches
//! it, named by version. srt checks recipe args against it the way the program will
//! parse them, including argparse's acceptance of any unique prefix of a long option
//! (`--api-ke` is `--api-key`), so every other check (managed flags, secrets) applies
//! to the flag a key really becomes. The same parser reads every rendered command back
//! in the test suite.
//!
//! A program that does not use argparse names its rules in its catalog (`syntax`,
//! [`Syntax`]): Go's `flag` package (etcd, nats-server, dumped by
//! `scripts/go-flag-catalog.py`) is read by `go_flag.rs`. Resolving a name, reading an
//! argv and rendering a flag each ask the catalog's syntax.

use crate::recipe::diag::{did_you_mean, Problem};
use crate::recipe::{looks_like_option, Arg, ArgValue, Args};
use serde::Deserialize;

mod go_flag;

/// The rules a program reads its command line by, named by its catalog's `syntax`
/// field (absent: argparse). Every question srt asks of a catalog (which option a name
/// is, what an argv holds, how a flag and its value are written) is answered by the
/// catalog's syntax, never by its program's name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Syntax {
    /// Python's argparse: `--name value` or `--name=value`, unique prefixes of long
    /// options (where the parser allows them), `nargs`, `--no-` forms.
    #[default]
    Argparse,
    /// Go's `flag` package (`go_flag.rs`): `-name` and `--name` are one flag, a value
    /// is the next word or follows `=`, a bool takes a value only after `=`, exact
    /// names only, parsing stops at the first word that is not a flag.
    GoFlag,
}

/// A program's shipped catalogs (`(version, JSON)`, newest first), parsed; each must
/// carry the version it is filed under.
pub(crate) fn parse_shipped(files: &[(&str, &str)]) -> Vec<Catalog> {
    files
        .iter()
        .map(|(v, text)| {
            let c = Catalog::parse(text).expect("a shipped catalog parses");
            assert_eq!(c.version, *v, "catalog file named by its version");
            c
        })
        .collect()
}

/// Who sets `flag`, in a table of the flags an engine or frontend derives (`(flag, who
/// sets it)`), or `None` when a recipe may set it.
pub fn managed_by(table: &[(&str, &'static str)], flag: &str) -> Option<&'static str> {
    table.iter().find(|(f, _)| *f == flag).map(|(_, why)| *why)
}

/// One program's options, as its parser defines them.
#[derive(Clone, Debug, Deserialize)]
pub struct Catalog {
    /// Program name (`vllm`, `vllm-router`, `sglang-router`).
    pub program: String,
    /// Its version.
    pub version: String,
    /// The argv prefix the options follow (`["vllm", "serve"]`).
    pub command: Vec<String>,
    /// Whether a unique prefix of a long option is accepted as that option.
    pub allow_abbrev: bool,
    /// Whether `--foo_bar` is read as `--foo-bar` (vLLM's parser normalises).
    pub underscore_equivalent: bool,
    /// The rules its command line is read by.
    #[serde(default)]
    pub syntax: Syntax,
    /// Positional arguments.
    #[serde(default)]
    pub positionals: Vec<Positional>,
    /// Options, sorted by their first flag.
    pub options: Vec<OptionSpec>,
    /// Environment variables the program reads (vLLM's `vllm.envs`), when known.
    #[serde(default)]
    pub env: Vec<String>,
    /// Option string -> (option, flag) positions, built on first use: every process's
    /// flags are resolved against the catalog (32,768 processes x a few flags x hundreds
    /// of options, scanned, was a sixth of a large plan).
    #[serde(skip)]
    exact: std::sync::OnceLock<std::collections::HashMap<String, (usize, usize)>>,
}

/// A positional argument.
#[derive(Clone, Debug, Deserialize)]
pub struct Positional {
    /// Destination name.
    pub dest: String,
    /// `nargs` as argparse has it.
    pub nargs: Option<serde_json::Value>,
}

/// One option.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct OptionSpec {
    /// Its option strings (`--tensor-parallel-size`, `-tp`), in the parser's order.
    pub flags: Vec<String>,
    /// Destination name.
    pub dest: String,
    /// argparse action (`store`, `store_true`, `boolean_optional`, `append`, ...).
    pub action: String,
    /// Whether it consumes a value.
    pub takes_value: bool,
    /// `nargs`: null, `"?"`, `"*"`, `"+"` or a count.
    pub nargs: Option<serde_json::Value>,
    /// Value type: `int`, `float`, `str`, `bool`, `json`, `path`, `other:<name>`.
    #[serde(rename = "type")]
    pub ty: Option<String>,
    /// Allowed values, stringified.
    pub choices: Option<Vec<String>>,
    /// Deprecated by the program.
    #[serde(default)]
    pub deprecated: bool,
    /// The environment variable its default is read from (Dynamo's programs), if any.
    #[serde(default)]
    pub env_var: Option<String>,
}

/// How many values an option takes on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    /// None (a switch).
    Zero,
    /// Exactly one.
    One,
    /// Zero or one (`?`).
    Optional,
    /// Any number (`*`) or at least one (`+`): `--flag a b c`.
    Many {
        /// At least one (`+`).
        at_least_one: bool,
    },
    /// Exactly `n`.
    Exactly(usize),
}

impl OptionSpec {
    /// The option's long name without dashes (`tensor-parallel-size`).
    pub fn name(&self) -> &str {
        self.flags
            .iter()
            .find(|f| f.starts_with("--"))
            .unwrap_or(&self.flags[0])
            .trim_start_matches('-')
    }

    /// How many values it takes.
    pub fn arity(&self) -> Arity {
        if !self.takes_value {
            return Arity::Zero;
        }
        match &self.nargs {
            None | Some(serde_json::Value::Null) => Arity::One,
            Some(serde_json::Value::String(s)) if s == "?" => Arity::Optional,
            Some(serde_json::Value::String(s)) if s == "*" => Arity::Many {
                at_least_one: false,
            },
            Some(serde_json::Value::String(s)) if s == "+" => Arity::Many { at_least_one: true },
            Some(serde_json::Value::Number(n)) => Arity::Exactly(n.as_u64().unwrap_or(1) as usize),
            Some(_) => Arity::One,
        }
    }

    /// Whether repeating the flag adds values (argparse `append`): otherwise the last
    /// occurrence silently wins.
    pub fn repeatable(&self) -> bool {
        self.action == "append" || self.action == "count"
    }

    /// Whether it has a `--no-` form (argparse `BooleanOptionalAction`).
    pub fn negatable(&self) -> bool {
        self.action == "boolean_optional"
    }
}

/// What a long option typed on a command line resolves to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution<'c> {
    /// An option string, exactly.
    Exact(&'c OptionSpec, &'c str),
    /// A unique prefix of this option string, which argparse accepts as it.
    Prefix(&'c OptionSpec, &'c str),
    /// A prefix of several option strings: argparse refuses it as ambiguous.
    Ambiguous(Vec<&'c str>),
    /// No such option.
    Unknown,
}

impl Catalog {
    /// Parse a catalog file.
    pub fn parse(text: &str) -> Result<Catalog, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Resolve `--name` as the program's parser does: an exact option string, else (when
    /// the parser allows abbreviations) the one option string it is a prefix of.
    pub fn resolve(&self, name: &str) -> Resolution<'_> {
        match self.syntax {
            Syntax::Argparse => self.resolve_argparse(name),
            Syntax::GoFlag => go_flag::resolve(self, name),
        }
    }

    /// The option holding exactly the option string `flag` (with its dashes).
    fn exact(&self, flag: &str) -> Option<(&OptionSpec, &str)> {
        let exact = self.exact.get_or_init(|| {
            let mut index = std::collections::HashMap::new();
            for (i, o) in self.options.iter().enumerate() {
                for (j, f) in o.flags.iter().enumerate() {
                    // The first option holding a string wins, as a scan finds it.
                    index.entry(f.clone()).or_insert((i, j));
                }
            }
            index
        });
        exact.get(flag).map(|&(i, j)| {
            let o = &self.options[i];
            (o, o.flags[j].as_str())
        })
    }

    /// [`Catalog::resolve`] by argparse's rules.
    fn resolve_argparse(&self, name: &str) -> Resolution<'_> {
        let typed = format!("--{}", self.normalise(name));
        if let Some((o, f)) = self.exact(&typed) {
            return Resolution::Exact(o, f);
        }
        let mut prefixed: Vec<(&OptionSpec, &str)> = Vec::new();
        for o in &self.options {
            for f in &o.flags {
                if *f == typed {
                    return Resolution::Exact(o, f);
                }
                if self.allow_abbrev && f.starts_with("--") && f.starts_with(&typed) {
                    prefixed.push((o, f));
                }
            }
        }
        match prefixed.as_slice() {
            [] => Resolution::Unknown,
            [(o, f)] => Resolution::Prefix(o, f),
            many => {
                let mut all: Vec<&str> = many.iter().map(|(_, f)| *f).collect();
                all.sort_unstable();
                Resolution::Ambiguous(all)
            }
        }
    }

    /// A flag name as the parser reads it (`foo_bar` is `foo-bar` where underscores
    /// are equivalent).
    fn normalise(&self, name: &str) -> String {
        if self.underscore_equivalent {
            name.replace('_', "-")
        } else {
            name.to_string()
        }
    }

    /// Every long option name (without dashes), for suggestions.
    pub fn long_names(&self) -> impl Iterator<Item = &str> {
        self.options
            .iter()
            .flat_map(|o| o.flags.iter())
            .filter(|f| f.starts_with("--"))
            .map(|f| f.trim_start_matches('-'))
    }

    /// Read `argv` (options after [`Catalog::command`]) as the program's parser would:
    /// every option known, every option given the number of values it takes, values
    /// in `choices`, ints and floats that parse, at most as many positionals as the
    /// program has. Returns the options seen (by their long name, in order) or the
    /// first problem, in argparse's words where it has them.
    pub fn parse_argv(&self, argv: &[String]) -> Result<Vec<String>, String> {
        match self.syntax {
            Syntax::Argparse => self.parse_argv_argparse(argv),
            Syntax::GoFlag => go_flag::parse_argv(self, argv),
        }
    }

    /// [`Catalog::parse_argv`] by argparse's rules.
    fn parse_argv_argparse(&self, argv: &[String]) -> Result<Vec<String>, String> {
        let mut seen = Vec::new();
        let mut positionals: Vec<&str> = Vec::new();
        let mut i = 0;
        while i < argv.len() {
            let token = &argv[i];
            i += 1;
            if token == "--" {
                positionals.extend(argv[i..].iter().map(String::as_str));
                break;
            }
            let Some(body) = token.strip_prefix("--").or_else(|| {
                token
                    .strip_prefix('-')
                    .filter(|b| !b.is_empty() && b.parse::<f64>().is_err())
            }) else {
                positionals.push(token);
                continue;
            };
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            let short = !token.starts_with("--");
            let spec = if short {
                self.options
                    .iter()
                    .find(|o| {
                        o.flags
                            .iter()
                            .any(|f| f == token.split('=').next().unwrap_or(token))
                    })
                    .map(|o| (o, token.as_str()))
            } else {
                match self.resolve(name) {
                    Resolution::Exact(o, f) | Resolution::Prefix(o, f) => Some((o, f)),
                    Resolution::Ambiguous(all) => {
                        return Err(format!(
                            "ambiguous option: --{name} could match {}",
                            all.join(", ")
                        ))
                    }
                    Resolution::Unknown => None,
                }
            };
            let Some((spec, flag)) = spec else {
                return Err(format!("unrecognized arguments: {token}"));
            };
            seen.push(spec.name().to_string());
            let mut values: Vec<String> = Vec::new();
            let takes = |i: usize| argv.get(i).is_some_and(|t| !looks_like_option(t));
            match (spec.arity(), inline) {
                (Arity::Zero, Some(_)) => {
                    return Err(format!("argument {flag}: ignored explicit argument"));
                }
                (Arity::Zero, None) => {}
                (_, Some(v)) => values.push(v),
                (Arity::One, None) => {
                    if !takes(i) {
                        return Err(format!("argument {flag}: expected one argument"));
                    }
                    values.push(argv[i].clone());
                    i += 1;
                }
                (Arity::Optional, None) => {
                    if takes(i) {
                        values.push(argv[i].clone());
                        i += 1;
                    }
                }
                (Arity::Many { at_least_one }, None) => {
                    while takes(i) {
                        values.push(argv[i].clone());
                        i += 1;
                    }
                    if at_least_one && values.is_empty() {
                        return Err(format!("argument {flag}: expected at least one argument"));
                    }
                }
                (Arity::Exactly(n), None) => {
                    for _ in 0..n {
                        if !takes(i) {
                            return Err(format!("argument {flag}: expected {n} arguments"));
                        }
                        values.push(argv[i].clone());
                        i += 1;
                    }
                }
            }
            for v in &values {
                spec.check_value(flag, v)?;
            }
        }
        self.check_positionals(&positionals)?;
        Ok(seen)
    }

    /// Refuse more positional arguments than the program has.
    fn check_positionals(&self, positionals: &[&str]) -> Result<(), String> {
        let max = self
            .positionals
            .iter()
            .map(|p| match &p.nargs {
                Some(serde_json::Value::String(s)) if s == "*" || s == "+" => usize::MAX,
                _ => 1,
            })
            .fold(0usize, usize::saturating_add);
        if positionals.len() > max {
            return Err(format!(
                "unrecognized arguments: {}",
                positionals[max..].join(" ")
            ));
        }
        Ok(())
    }
}

impl OptionSpec {
    /// Check one value as the parser's type and choices would.
    pub fn check_value(&self, flag: &str, value: &str) -> Result<(), String> {
        if let Some(choices) = &self.choices {
            if !choices.iter().any(|c| c == value) {
                return Err(format!(
                    "argument {flag}: invalid choice: '{value}' (choose from {})",
                    choices
                        .iter()
                        .map(|c| format!("'{c}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        let bad = |what: &str| Err(format!("argument {flag}: invalid {what} value: '{value}'"));
        match self.ty.as_deref() {
            Some("int") if value.trim().parse::<i64>().is_err() => bad("int"),
            Some("float") if value.trim().parse::<f64>().is_err() => bad("float"),
            Some("json") if serde_json::from_str::<serde_json::Value>(value).is_err() => {
                bad("JSON")
            }
            _ => Ok(()),
        }
    }
}

/// Who sets a flag srt manages, for the diagnostic that refuses it in a recipe.
pub type ManagedBy<'a> = &'a dyn Fn(&str) -> Option<&'static str>;

/// Check every key of `args` (`path` is where they are written, `roles.agg.args`) as
/// `catalog`'s program will read it. A key resolves to an option exactly as the
/// program's parser resolves it (a unique prefix is that option), and the resolved
/// option is what the other rules see: an option srt manages (`managed`) or one named
/// like a secret is refused whatever abbreviation reaches it. Then: an unknown or
/// ambiguous key is refused (with a suggestion), and every value is checked against the
/// option's arity, type and choices. (An abbreviation is accepted, as the program
/// accepts it; [`spell_out`] writes it in full, with a warning, before the args are
/// read.)
pub fn check_args(
    catalog: &Catalog,
    args: &Args,
    path: &str,
    managed: ManagedBy<'_>,
    problems: &mut Vec<Problem>,
) {
    let program = format!("{} {}", catalog.program, catalog.version);
    for arg in &args.0 {
        let at = format!("`{path}.{}`", arg.key);
        let (spec, flag, abbreviated) = match catalog.resolve(&arg.key) {
            Resolution::Exact(o, f) => (o, f, false),
            Resolution::Prefix(o, f) => (o, f, true),
            Resolution::Ambiguous(all) => {
                problems.push(
                    Problem::new(
                        "srt::recipe::unknown_flag",
                        arg.key_span,
                        format!(
                            "{at} is ambiguous for {program}: it could be {}",
                            all.join(", ")
                        ),
                    )
                    .label("ambiguous flag")
                    .help("write the flag in full"),
                );
                continue;
            }
            Resolution::Unknown => {
                let p = Problem::new(
                    "srt::recipe::unknown_flag",
                    arg.key_span,
                    format!("{at}: {program} has no flag `--{}`", arg.key),
                )
                .label("unknown flag");
                problems.push(match did_you_mean(&arg.key, catalog.long_names()) {
                    Some(s) => p.help(format!("did you mean `{s}`?")),
                    None => p.help(format!(
                        "see `{} --help`; srt checks flags against {program} (engine.version picks the release)",
                        catalog.command.join(" ")
                    )),
                });
                continue;
            }
        };
        let name = spec.name();
        let reads_as = if abbreviated {
            format!(" (which {} reads as `{flag}`)", catalog.program)
        } else {
            String::new()
        };
        if let Some(owner) = managed(name) {
            problems.push(
                Problem::new(
                    "srt::recipe::managed_flag",
                    arg.key_span,
                    format!("{at}{reads_as} is set by srt: {owner}"),
                )
                .label("managed by srt")
                .help("remove it: srt sets it from what is named above (a recipe key, or a port it allocates)"),
            );
            continue;
        }
        if crate::secrets::is_sensitive(&name.replace('-', "_")) {
            problems.push(
                Problem::new(
                    "srt::recipe::secret_arg",
                    arg.key_span,
                    format!("{at}{reads_as} would put a secret on the command line"),
                )
                .label("secret as a flag")
                .secret(arg.value_span)
                .help(format!(
                    "command lines are visible to every user (`ps`, scheduler job records); \
                     pass the secret in `{}.env` instead (vLLM reads `VLLM_API_KEY` for \
                     `--api-key`, Hugging Face tools read `HF_TOKEN`)",
                    path.trim_end_matches(".args")
                )),
            );
            continue;
        }
        if let Err(why) = check_value(spec, flag, &arg.value) {
            problems.push(
                Problem::new(
                    "srt::recipe::flag_value",
                    arg.value_span,
                    format!("{at}: {why}"),
                )
                .label(format!("not a value {flag} takes")),
            );
        }
    }
}

/// `args` with every key that is a unique prefix of a long option (argparse's
/// abbreviation, which the program reads as that option) written as the option in
/// full, each with a located warning; `None` when no key is one. What reads or renders
/// the args after this sees the flag by its name. `path` names the args in messages
/// (`roles.agg.args`).
pub fn spell_out(catalog: &Catalog, args: &Args, path: &str) -> Option<(Args, Vec<Problem>)> {
    let mut warnings = Vec::new();
    let spelled: Vec<Arg> = args
        .0
        .iter()
        .map(|arg| match catalog.resolve(&arg.key) {
            Resolution::Prefix(_, flag) if flag.starts_with("--") => {
                let full = flag.trim_start_matches('-');
                warnings.push(
                    Problem::warning(
                        "srt::recipe::flag_abbreviation",
                        arg.key_span,
                        format!(
                            "`{path}.{}` abbreviates `{flag}` ({} {} reads it so): srt writes the flag in full",
                            arg.key, catalog.program, catalog.version
                        ),
                    )
                    .label("abbreviated flag")
                    .help(format!(
                        "write `{full}`: an abbreviation can stop being unique in a later release"
                    )),
                );
                Arg {
                    key: full.to_string(),
                    ..arg.clone()
                }
            }
            _ => arg.clone(),
        })
        .collect();
    (!warnings.is_empty()).then_some((Args(spelled), warnings))
}

/// Check a recipe value against what the option takes; the reason when it does not.
fn check_value(spec: &OptionSpec, flag: &str, value: &ArgValue) -> Result<(), String> {
    match (spec.arity(), value) {
        (_, ArgValue::Null) => Ok(()),
        (Arity::Zero, ArgValue::Bool(_)) => Ok(()),
        (Arity::Zero, ArgValue::Str(s)) => Err(match crate::recipe::load::yaml11_boolean(s) {
            Some(b) => format!("{flag} is a switch; `{s}` is a string in YAML 1.2: write `{b}`"),
            None => format!("{flag} is a switch and takes no value; write `true` or `false`"),
        }),
        (Arity::Zero, _) => Err(format!(
            "{flag} is a switch and takes no value; write `true` or `false`"
        )),
        (_, ArgValue::Bool(true)) if spec.arity() != Arity::Optional => {
            Err(format!("{flag} takes a value, not `true`"))
        }
        (_, ArgValue::Bool(false)) => Ok(()),
        (arity, ArgValue::List(items)) => {
            let many = matches!(arity, Arity::Many { .. }) || spec.repeatable();
            if !many {
                return Err(format!("{flag} takes one value, not a list"));
            }
            items
                .iter()
                .try_for_each(|v| spec.check_value(flag, &v.render()))
        }
        (_, v) => spec.check_value(flag, &v.render()),
    }
}

/// A flag set as [`RenderMemo`] keeps it: for which catalog, the flags, their tokens.
type Rendered = (
    Option<&'static Catalog>,
    Vec<(String, ArgValue)>,
    Vec<String>,
);

/// [`render`], remembering the last few flag sets rendered: the processes of a role
/// have the same flags (two sets when an endpoint mixes API servers and headless
/// ranks), so a launch plan renders each set once instead of once per process.
#[derive(Debug, Default)]
pub struct RenderMemo {
    /// Most recently used last.
    recent: Vec<Rendered>,
}

impl RenderMemo {
    /// How many flag sets it remembers.
    const KEEP: usize = 4;

    /// Append the tokens of `flags` to `out`, as [`render`] writes them.
    pub fn render(
        &mut self,
        catalog: Option<&'static Catalog>,
        flags: Vec<(String, ArgValue)>,
        out: &mut impl for<'t> Extend<&'t String>,
    ) {
        let same_catalog = |c: &Option<&Catalog>| match (c, catalog) {
            (Some(a), Some(b)) => std::ptr::eq(*a, b),
            (None, None) => true,
            _ => false,
        };
        let hit = self
            .recent
            .iter()
            .position(|(c, f, _)| same_catalog(c) && *f == flags);
        let entry = match hit {
            Some(i) => self.recent.remove(i),
            None => {
                if self.recent.len() == Self::KEEP {
                    self.recent.remove(0);
                }
                let tokens = render(catalog, &flags);
                (catalog, flags, tokens)
            }
        };
        out.extend(&entry.2);
        self.recent.push(entry);
    }
}

/// Render flags to argv tokens, in the order given, the way `catalog`'s program reads
/// them: `true` is the switch, `false` its `--no-` form when it has one (else nothing:
/// the default), a list is one `--flag a b` for an option taking many values and a
/// repeated flag for an appending one, a value starting with `-` is attached with `=`
/// (a separate word starting with `-` reads as an option). Without a catalog, lists
/// repeat the flag. A Go-flag program gets every value attached (`--name=value`) and
/// `false` as `--name=false` (`Syntax::push_value`, `Syntax::push_false`).
pub fn render(catalog: Option<&Catalog>, flags: &[(String, ArgValue)]) -> Vec<String> {
    let syntax = catalog.map_or(Syntax::Argparse, |c| c.syntax);
    let mut out = Vec::new();
    for (key, value) in flags {
        let spec = catalog.and_then(|c| match c.resolve(key) {
            Resolution::Exact(o, _) => Some(o),
            _ => None,
        });
        push_flag(&mut out, syntax, key, value, spec);
    }
    out
}

impl Syntax {
    /// Append `flag` with one value, as the program reads it back: argparse takes the
    /// value as the next word unless it starts with `-` (it would read as an option);
    /// Go's `flag` package takes `--name=value` for every kind of flag, bools included.
    fn push_value(self, out: &mut Vec<String>, flag: &str, v: String) {
        match self {
            Syntax::Argparse if !v.starts_with('-') => {
                out.push(flag.to_string());
                out.push(v);
            }
            _ => out.push(format!("{flag}={v}")),
        }
    }

    /// Append a switch set to `false`: argparse's `--no-` form when the option has one
    /// (else nothing: the default); Go's `--name=false`.
    fn push_false(self, out: &mut Vec<String>, key: &str, spec: Option<&OptionSpec>) {
        match self {
            Syntax::Argparse if spec.is_some_and(OptionSpec::negatable) => {
                out.push(format!("--no-{key}"));
            }
            Syntax::Argparse => {}
            Syntax::GoFlag => out.push(format!("--{key}=false")),
        }
    }
}

fn push_flag(
    out: &mut Vec<String>,
    syntax: Syntax,
    key: &str,
    value: &ArgValue,
    spec: Option<&OptionSpec>,
) {
    let flag = format!("--{key}");
    match value {
        ArgValue::Null => {}
        ArgValue::Bool(true) => out.push(flag.clone()),
        ArgValue::Bool(false) => syntax.push_false(out, key, spec),
        ArgValue::List(items) if spec.is_some_and(|s| matches!(s.arity(), Arity::Many { .. })) => {
            if items.is_empty() {
                return;
            }
            // Values read as options are refused by the loader; negative numbers are
            // values to argparse.
            out.push(flag.clone());
            out.extend(items.iter().map(ArgValue::render));
        }
        ArgValue::List(items) => {
            for item in items {
                push_flag(out, syntax, key, item, spec);
            }
        }
        scalar => syntax.push_value(out, &flag, scalar.render()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Catalog {
        Catalog::parse(
            r#"{"program": "p", "version": "1", "command": ["p"], "allow_abbrev": true,
            "underscore_equivalent": true, "positionals": [{"dest": "model", "nargs": "?"}],
            "options": [
              {"flags": ["--api-key"], "dest": "api_key", "action": "store", "takes_value": true, "nargs": null, "type": "str", "choices": null},
              {"flags": ["--enforce-eager", "--no-enforce-eager"], "dest": "enforce_eager", "action": "boolean_optional", "takes_value": false, "nargs": 0, "type": null, "choices": null},
              {"flags": ["--port"], "dest": "port", "action": "store", "takes_value": true, "nargs": null, "type": "int", "choices": null},
              {"flags": ["--policy"], "dest": "policy", "action": "store", "takes_value": true, "nargs": null, "type": "str", "choices": ["random", "round_robin"]},
              {"flags": ["--pooler-config"], "dest": "pooler_config", "action": "store", "takes_value": true, "nargs": null, "type": "json", "choices": null},
              {"flags": ["--served-model-name"], "dest": "served_model_name", "action": "store", "takes_value": true, "nargs": "+", "type": "str", "choices": null},
              {"flags": ["--tensor-parallel-size", "-tp"], "dest": "tensor_parallel_size", "action": "store", "takes_value": true, "nargs": null, "type": "int", "choices": null}
            ]}"#,
        )
        .unwrap()
    }

    #[test]
    fn resolves_like_argparse() {
        let c = tiny();
        assert!(matches!(c.resolve("port"), Resolution::Exact(_, "--port")));
        assert!(matches!(
            c.resolve("api-ke"),
            Resolution::Prefix(_, "--api-key")
        ));
        assert!(matches!(c.resolve("por"), Resolution::Prefix(_, "--port")));
        assert!(matches!(
            c.resolve("api_key"),
            Resolution::Exact(_, "--api-key")
        ));
        assert!(matches!(
            c.resolve("no-enf"),
            Resolution::Prefix(_, "--no-enforce-eager")
        ));
        assert_eq!(
            c.resolve("po"),
            Resolution::Ambiguous(vec!["--policy", "--pooler-config", "--port"])
        );
        assert_eq!(c.resolve("nope"), Resolution::Unknown);
        let strict = Catalog {
            allow_abbrev: false,
            ..tiny()
        };
        assert_eq!(strict.resolve("por"), Resolution::Unknown);
    }

    fn arg(key: &str, value: ArgValue) -> Arg {
        let at = miette::SourceSpan::from(0..1);
        Arg {
            key: key.into(),
            key_span: at,
            value,
            value_span: at,
        }
    }

    /// A unique prefix is written as its flag, with a warning at the key; an exact
    /// flag, an ambiguous prefix (refused by the check) and an unknown key are left.
    #[test]
    fn abbreviations_are_spelled_out_with_a_warning() {
        let c = tiny();
        let args = Args(vec![
            arg("api-k", ArgValue::Str("x".into())),
            arg("port", ArgValue::Int(1)),
            arg("po", ArgValue::Int(2)),
            arg("nothing", ArgValue::Int(3)),
        ]);
        let (spelled, warnings) = spell_out(&c, &args, "roles.agg.args").expect("one abbreviation");
        let keys: Vec<&str> = spelled.0.iter().map(|a| a.key.as_str()).collect();
        assert_eq!(keys, ["api-key", "port", "po", "nothing"]);
        assert_eq!(spelled.0[0].value, ArgValue::Str("x".into()));
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].is_warning());
        assert_eq!(warnings[0].code, "srt::recipe::flag_abbreviation");
        assert!(
            warnings[0]
                .message
                .contains("`roles.agg.args.api-k` abbreviates `--api-key`"),
            "{}",
            warnings[0].message
        );
        let exact = Args(vec![arg("port", ArgValue::Int(1))]);
        assert!(spell_out(&c, &exact, "roles.agg.args").is_none());
    }

    #[test]
    fn reads_command_lines_like_argparse() {
        let c = tiny();
        let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            c.parse_argv(&argv(
                "/m --port 8 -tp 2 --served-model-name a b --enforce-eager --pooler-config {}"
            )),
            Ok(vec![
                "port".into(),
                "tensor-parallel-size".into(),
                "served-model-name".into(),
                "enforce-eager".into(),
                "pooler-config".into()
            ])
        );
        assert!(c.parse_argv(&argv("--port=-1")).is_ok());
        for (bad, says) in [
            ("--port eighty", "invalid int value"),
            ("--policy fastest", "invalid choice"),
            ("--enforce-eager=yes", "ignored explicit argument"),
            ("--port --policy random", "expected one argument"),
            ("--served-model-name", "expected at least one"),
            ("--bogus 1", "unrecognized arguments: --bogus"),
            ("--po 1", "ambiguous option"),
            ("a b", "unrecognized arguments: b"),
            ("--pooler-config {x", "invalid JSON"),
        ] {
            let err = c.parse_argv(&argv(bad)).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn option_like_values() {
        for v in ["--x", "-x", "--port=1", "-inf"] {
            assert!(looks_like_option(v), "{v}");
        }
        for v in ["-1", "-0.5", "-.5", "-", "x", "1"] {
            assert!(!looks_like_option(v), "{v}");
        }
    }

    #[test]
    fn shipped_catalogs_load() {
        for text in [
            include_str!("engine/vllm/catalog/vllm-0.32.0.json"),
            include_str!("frontend/vllm_router/catalog/vllm-router-0.1.17.json"),
            include_str!("frontend/sglang_router/catalog/sglang-router-0.3.2.json"),
            include_str!("frontend/smg/catalog/smg-1.13.0.json"),
            include_str!("engine/sglang/catalog/sglang-0.5.23.json"),
        ] {
            let c = Catalog::parse(text).unwrap();
            assert!(c.options.len() > 50, "{}", c.program);
        }
    }

    /// SGLang's catalog, made ahead of its engine, reads as argparse: the command srt
    /// will render, the topology and P/D flags with their aliases, its switches, and
    /// the prefixes SGLang's parser accepts.
    #[test]
    fn the_sglang_catalog_resolves_its_topology_flags() {
        let c = Catalog::parse(include_str!("engine/sglang/catalog/sglang-0.5.23.json")).unwrap();
        assert_eq!(c.command, ["python3", "-m", "sglang.launch_server"]);
        assert_eq!(
            (c.program.as_str(), c.version.as_str()),
            ("sglang", "0.5.23")
        );
        assert!(c.allow_abbrev && !c.underscore_equivalent);
        assert_eq!(c.syntax, Syntax::Argparse);
        assert!(c.options.len() > 500, "{}", c.options.len());
        let exact = |name: &str| match c.resolve(name) {
            Resolution::Exact(o, _) => o,
            other => panic!("{name}: {other:?}"),
        };
        for (name, first) in [
            ("tensor-parallel-size", "--tp-size"),
            ("data-parallel-size", "--dp-size"),
            ("ep", "--ep-size"),
            ("nccl-init-addr", "--dist-init-addr"),
            ("model", "--model-path"),
        ] {
            assert_eq!(exact(name).flags[0], first, "{name}");
        }
        for name in [
            "nnodes",
            "node-rank",
            "port",
            "nccl-port",
            "base-gpu-id",
            "disaggregation-bootstrap-port",
        ] {
            assert_eq!(exact(name).ty.as_deref(), Some("int"), "{name}");
            assert_eq!(exact(name).arity(), Arity::One, "{name}");
        }
        for name in [
            "enable-dp-attention",
            "skip-server-warmup",
            "trust-remote-code",
            "enable-dp-lm-head",
        ] {
            assert_eq!(exact(name).arity(), Arity::Zero, "{name}");
        }
        assert!(exact("enable-dp-attention").deprecated);
        assert_eq!(
            exact("disaggregation-mode").choices.as_deref(),
            Some(&["null".to_string(), "prefill".into(), "decode".into()][..])
        );
        assert!(exact("disaggregation-transfer-backend")
            .choices
            .as_ref()
            .is_some_and(|c| c.iter().any(|b| b == "nixl") && c.iter().any(|b| b == "mooncake")));
        assert!(matches!(
            c.resolve("tp"),
            Resolution::Prefix(_, "--tp-size")
        ));
        assert!(matches!(
            c.resolve("dp"),
            Resolution::Prefix(_, "--dp-size")
        ));
        assert!(matches!(
            c.resolve("disaggregation"),
            Resolution::Ambiguous(_)
        ));
        assert_eq!(c.resolve("tp_size"), Resolution::Unknown);
        let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            c.parse_argv(&argv(
                "--model-path /m --tp-size 2 --dp-size 2 --enable-dp-attention --disaggregation-mode prefill \
                 --disaggregation-bootstrap-port 8998 --dist-init-addr 10.0.0.1:5000 --nnodes 2 --node-rank 1"
            )),
            Ok([
                "model-path",
                "tp-size",
                "dp-size",
                "enable-dp-attention",
                "disaggregation-mode",
                "disaggregation-bootstrap-port",
                "dist-init-addr",
                "nnodes",
                "node-rank"
            ]
            .map(String::from)
            .to_vec())
        );
        for bad in [
            "--disaggregation-mode both",
            "--nnodes two",
            "--skip-server-warmup=1",
        ] {
            assert!(c.parse_argv(&argv(bad)).is_err(), "{bad}");
        }
    }

    /// Every catalog file checked in under a `catalog/` folder of the crate loads and
    /// says which rules its program reads a command line by: a `syntax` srt knows
    /// (absent: argparse), or a getopt_long catalog of a C program (`long` and `short`
    /// options, read by `crate::getopt`). A new program's catalog cannot be read by the
    /// wrong rules unnoticed.
    #[test]
    fn every_checked_in_catalog_names_a_known_syntax() {
        let mut files = Vec::new();
        let mut dirs = vec![std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src"
        ))];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "json")
                    && dir.file_name().is_some_and(|d| d == "catalog")
                {
                    files.push(path);
                }
            }
        }
        assert!(files.len() >= 10, "{files:?}");
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            let json: serde_json::Value = serde_json::from_str(&text).unwrap();
            let shown = path.display();
            if json.get("long").is_some() && json.get("syntax").is_none() {
                let c = crate::getopt::OptionCatalog::from_json(&text)
                    .unwrap_or_else(|e| panic!("{shown}: {e}"));
                assert!(!c.long.is_empty(), "{shown}");
                continue;
            }
            let c = Catalog::parse(&text).unwrap_or_else(|e| panic!("{shown}: {e}"));
            assert!(!c.options.is_empty(), "{shown}");
            let named = json.get("syntax").is_some();
            assert!(
                named || c.syntax == Syntax::Argparse,
                "{shown}: {:?}",
                c.syntax
            );
        }
        assert!(Catalog::parse(
            r#"{"program": "p", "version": "1", "command": ["p"],
            "allow_abbrev": false, "underscore_equivalent": false, "options": [],
            "syntax": "docopt"}"#
        )
        .is_err());
    }

    /// The memo gives what rendering each time gives, whatever changes between calls.
    #[test]
    fn the_render_memo_renders_what_render_does() {
        let a: &'static Catalog = Box::leak(Box::new(tiny()));
        let b: &'static Catalog = Box::leak(Box::new(tiny()));
        let flags = |eager: bool, names: &[&str]| {
            vec![
                ("enforce-eager".to_string(), ArgValue::Bool(eager)),
                (
                    "served-model-name".to_string(),
                    ArgValue::List(names.iter().map(|n| ArgValue::Str((*n).into())).collect()),
                ),
            ]
        };
        let mut memo = RenderMemo::default();
        struct Tokens(Vec<String>);
        impl<'t> Extend<&'t String> for Tokens {
            fn extend<I: IntoIterator<Item = &'t String>>(&mut self, tokens: I) {
                self.0.extend(tokens.into_iter().cloned());
            }
        }
        // What it appends, after what is there.
        let mut memo_render = |catalog, f: Vec<(String, ArgValue)>| {
            let mut out = Tokens(vec!["vllm".into()]);
            memo.render(catalog, f, &mut out);
            out.0.split_off(1)
        };
        for (catalog, f) in [
            (Some(a), flags(true, &["m"])),
            (Some(a), flags(true, &["m"])),
            (Some(a), flags(false, &["m"])),
            (Some(b), flags(false, &["m"])),
            (None, flags(false, &["m"])),
            (None, flags(false, &["m", "n"])),
            (Some(a), flags(false, &["m", "n"])),
        ] {
            assert_eq!(memo_render(catalog, f.clone()), render(catalog, &f));
        }
        // Alternating sets, and more sets than it keeps.
        let names = ["a", "b", "c", "d", "e", "f"];
        for i in 0..40 {
            let (catalog, f) = match i % 3 {
                0 => (Some(a), flags(i % 2 == 0, &names[..1 + i % 6])),
                1 => (None, flags(true, &names[..1 + (i / 3) % 6])),
                _ => (Some(b), flags(false, &names[..1 + i % 4])),
            };
            assert_eq!(
                memo_render(catalog, f.clone()),
                render(catalog, &f),
                "call {i}"
            );
        }
    }
}
