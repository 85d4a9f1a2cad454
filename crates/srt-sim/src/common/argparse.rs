//! A command line read by Python's argparse rules from an engine's shipped flag catalog
//! (the JSON dump of its own parser that srt checks recipes against, `crates/srt/src/
//! engine/*/catalog/`), never from a hand-kept table: every option the engine has, its
//! aliases, whether it takes a value and how many (`nargs`), its type and choices.
//!
//! The rules, as argparse applies them to a parser without positionals:
//!
//! - `--name value` and `--name=value`; a unique prefix of an option string is that
//!   option when the catalog allows abbreviations (`--por 1` is `--port 1`); a prefix of
//!   several is `ambiguous option: --p could match --port, --pp-size, ...`;
//! - a word starting with `-` is an option, so it is no value (`expected one argument`),
//!   unless it is a negative number (`--base-gpu-id -1`) or holds a space;
//! - switches take no value (`--switch=1`: `ignored explicit argument '1'`); `--x/--no-x`
//!   pairs (`boolean_optional`) set the destination to false with `--no-x`;
//! - `nargs` `?` (the value is optional), `*` and `+` (every following value);
//! - values are converted by type (`int`, `float`; named converters the engine supplies
//!   for `json` and `other:*` types) and checked against the choices;
//! - the last occurrence wins; `-h`/`--help` asks for help;
//! - then the required options are checked, then what was not recognised is refused
//!   (`unrecognized arguments: --foo 2`), unknown options and stray words alike.

use serde::Deserialize;
use serde_json::Value;

/// One program's options, as its parser defines them (the fields of srt's catalog format
/// the parser needs).
#[derive(Debug, Deserialize)]
pub struct Catalog {
    /// Program name.
    pub program: String,
    /// Its version.
    pub version: String,
    /// Whether a unique prefix of a long option is accepted as that option.
    pub allow_abbrev: bool,
    /// Whether `--foo_bar` is read as `--foo-bar`.
    pub underscore_equivalent: bool,
    /// Options, sorted by their first flag.
    pub options: Vec<OptionSpec>,
}

/// One option.
#[derive(Debug, Clone, Deserialize)]
pub struct OptionSpec {
    /// Its option strings, in the parser's order.
    pub flags: Vec<String>,
    /// Destination name.
    pub dest: String,
    /// argparse action (`store`, `store_true`, `boolean_optional`, `append`, ...).
    pub action: String,
    /// Whether it consumes a value.
    pub takes_value: bool,
    /// `nargs`: null, `"?"`, `"*"`, `"+"` or a count.
    pub nargs: Option<Value>,
    /// Value type: `int`, `float`, `str`, `json`, `other:<name>`.
    #[serde(rename = "type")]
    pub ty: Option<String>,
    /// Allowed values, stringified.
    pub choices: Option<Vec<String>>,
    /// Whether the option must be given.
    #[serde(default)]
    pub required: bool,
}

/// A command line the program's parser refuses (argparse exits 2), or `--help`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// `-h`/`--help`.
    #[error("help requested")]
    Help,
    /// argparse's message, without its `prog: error: ` prefix.
    #[error("{0}")]
    Usage(String),
}

/// How a converter named by a catalog `type` turns a word into a value, or why not (the
/// message argparse prints after `argument --x: `).
pub type Converter = fn(&str, &OptionSpec) -> Result<Value, String>;

/// What a command line set: each given option's destination and its converted value, in
/// the order first given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    values: Vec<(String, Value)>,
}

impl Parsed {
    /// The value given for `dest`, if it was given.
    pub fn get(&self, dest: &str) -> Option<&Value> {
        self.values.iter().find(|(d, _)| d == dest).map(|(_, v)| v)
    }

    /// Every given destination and value, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.values.iter().map(|(d, v)| (d.as_str(), v))
    }

    /// A string option.
    pub fn str(&self, dest: &str) -> Option<&str> {
        self.get(dest).and_then(Value::as_str)
    }

    /// An integer option.
    pub fn int(&self, dest: &str) -> Option<i64> {
        self.get(dest).and_then(Value::as_i64)
    }

    /// A switch: given (true, or false for `--no-x`), else `default`.
    pub fn flag(&self, dest: &str, default: bool) -> bool {
        self.get(dest).and_then(Value::as_bool).unwrap_or(default)
    }

    fn set(&mut self, dest: &str, v: Value, append: bool) {
        match self.values.iter_mut().find(|(d, _)| d == dest) {
            Some((_, old)) if append => match old {
                Value::Array(items) => items.push(v),
                _ => *old = Value::Array(vec![old.take(), v]),
            },
            Some((_, old)) => *old = v,
            None if append => self.values.push((dest.into(), Value::Array(vec![v]))),
            None => self.values.push((dest.into(), v)),
        }
    }
}

/// A word of the command line, as argparse classifies it before consuming any.
#[derive(Debug, Clone)]
enum Word<'c> {
    /// A value or a stray positional.
    Value,
    /// `--`: every word after it is a positional.
    End,
    /// An option the parser knows, as typed, with its `=value` if any.
    Known(&'c OptionSpec, String, Option<String>),
    /// `-h`/`--help`.
    Help,
    /// Looks like an option but is none.
    Unknown,
}

impl Catalog {
    /// Parses a catalog file.
    pub fn parse_json(text: &str) -> Result<Catalog, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The option holding exactly this option string.
    fn exact(&self, s: &str) -> Option<&OptionSpec> {
        self.options.iter().find(|o| o.flags.iter().any(|f| f == s))
    }

    /// Every option string starting with `prefix`, with its option (argparse counts each
    /// string, aliases of one option included), `--help` among them.
    fn prefixed<'c>(&'c self, prefix: &str) -> Vec<(Option<&'c OptionSpec>, &'c str)> {
        let mut out: Vec<(Option<&OptionSpec>, &str)> = self
            .options
            .iter()
            .flat_map(|o| o.flags.iter().map(move |f| (Some(o), f.as_str())))
            .filter(|(_, f)| f.starts_with(prefix))
            .collect();
        if "--help".starts_with(prefix) {
            out.push((None, "--help"));
        }
        out
    }

    fn normalise(&self, name: &str) -> String {
        match name.strip_prefix("--") {
            Some(rest) if self.underscore_equivalent => format!("--{}", rest.replace('_', "-")),
            _ => name.to_string(),
        }
    }

    /// argparse's `_parse_optional`: what `word` is.
    fn classify<'c>(&'c self, word: &str) -> Result<Word<'c>, ParseError> {
        if word == "--" {
            return Ok(Word::End);
        }
        if !word.starts_with('-') || word.len() == 1 {
            return Ok(Word::Value);
        }
        if word == "-h" || word == "--help" {
            return Ok(Word::Help);
        }
        let (name, value) = match word.split_once('=') {
            Some((n, v)) => (self.normalise(n), Some(v.to_string())),
            None => (self.normalise(word), None),
        };
        if let Some(o) = self.exact(&name) {
            return Ok(Word::Known(o, name, value));
        }
        if name == "--help" {
            return Ok(Word::Help);
        }
        if self.allow_abbrev && name.starts_with("--") {
            let found = self.prefixed(&name);
            match found.as_slice() {
                [] => {}
                [(Some(o), f)] => return Ok(Word::Known(o, f.to_string(), value)),
                [(None, _)] => return Ok(Word::Help),
                many => {
                    return Err(ParseError::Usage(format!(
                        "ambiguous option: {word} could match {}",
                        many.iter().map(|(_, f)| *f).collect::<Vec<_>>().join(", ")
                    )))
                }
            }
        }
        if is_negative_number(word) || word.contains(' ') {
            return Ok(Word::Value);
        }
        Ok(Word::Unknown)
    }

    /// Reads `argv` (the words after the program) as the program's parser would.
    /// `converters` turn the catalog's non-builtin types (`json`, `other:<name>`) into
    /// values; a type with no converter is kept as a string.
    pub fn parse(
        &self,
        argv: &[String],
        converters: &[(&str, Converter)],
    ) -> Result<Parsed, ParseError> {
        let mut words = Vec::with_capacity(argv.len());
        let mut ended = false;
        for w in argv {
            let word = if ended {
                Word::Value
            } else {
                self.classify(w)?
            };
            ended |= matches!(word, Word::End);
            words.push(word);
        }
        let mut parsed = Parsed::default();
        let mut extras: Vec<&str> = Vec::new();
        let mut i = 0;
        while i < argv.len() {
            let word = words[i].clone();
            let raw = argv[i].as_str();
            i += 1;
            let (o, typed, inline) = match word {
                Word::End => continue,
                Word::Value | Word::Unknown => {
                    extras.push(raw);
                    continue;
                }
                Word::Help => return Err(ParseError::Help),
                Word::Known(o, typed, inline) => (o, typed, inline),
            };
            let display = o.flags.join("/");
            let bad = |msg: String| ParseError::Usage(format!("argument {display}: {msg}"));
            if !o.takes_value {
                if let Some(v) = inline {
                    return Err(bad(format!("ignored explicit argument '{v}'")));
                }
                let on = !(o.action == "boolean_optional" && typed.starts_with("--no-"));
                parsed.set(&o.dest, Value::Bool(on), false);
                continue;
            }
            // The values that follow, up to the next option or `--`.
            let following = words[i..]
                .iter()
                .take_while(|w| matches!(w, Word::Value))
                .count();
            let values: Vec<&str> = match (nargs(o), inline.as_deref()) {
                (_, Some(v)) => vec![v],
                (Nargs::One, None) => {
                    if following == 0 {
                        return Err(bad("expected one argument".into()));
                    }
                    vec![argv[i].as_str()]
                }
                (Nargs::Optional, None) => argv[i..i + following.min(1)]
                    .iter()
                    .map(String::as_str)
                    .collect(),
                (Nargs::Many { at_least_one }, None) => {
                    if at_least_one && following == 0 {
                        return Err(bad("expected at least one argument".into()));
                    }
                    argv[i..i + following].iter().map(String::as_str).collect()
                }
                (Nargs::Exactly(n), None) => {
                    if following < n {
                        return Err(bad(format!("expected {n} arguments")));
                    }
                    argv[i..i + n].iter().map(String::as_str).collect()
                }
            };
            if inline.is_none() {
                i += values.len();
            }
            let mut converted = Vec::with_capacity(values.len());
            for v in &values {
                converted.push(convert(o, v, converters).map_err(bad)?);
            }
            let value = match nargs(o) {
                Nargs::One => converted.pop().unwrap_or(Value::Null),
                // A bare `--x` with `nargs='?'` stores the option's const (`''` where
                // SGLang has one, None by argparse's default); the catalog has no const.
                Nargs::Optional => converted.pop().unwrap_or(Value::Null),
                Nargs::Many { .. } | Nargs::Exactly(_) => Value::Array(converted),
            };
            parsed.set(&o.dest, value, o.action == "append");
        }
        let missing: Vec<String> = self
            .options
            .iter()
            .filter(|o| o.required && parsed.get(&o.dest).is_none())
            .map(|o| o.flags.join("/"))
            .collect();
        if !missing.is_empty() {
            return Err(ParseError::Usage(format!(
                "the following arguments are required: {}",
                missing.join(", ")
            )));
        }
        if !extras.is_empty() {
            return Err(ParseError::Usage(format!(
                "unrecognized arguments: {}",
                extras.join(" ")
            )));
        }
        Ok(parsed)
    }

    /// The option whose destination is `dest`.
    pub fn option(&self, dest: &str) -> Option<&OptionSpec> {
        self.options.iter().find(|o| o.dest == dest)
    }

    /// The option `flag` (one of its option strings, written in full) names.
    pub fn by_flag(&self, flag: &str) -> Option<&OptionSpec> {
        self.options
            .iter()
            .find(|o| o.flags.iter().any(|f| f == flag))
    }

    /// Its long option strings by destination (`tp_size` -> `tp-size`), for logging.
    pub fn long_name<'c>(&'c self, dest: &str) -> Option<&'c str> {
        self.option(dest)
            .and_then(|o| o.flags.first())
            .map(|f| f.trim_start_matches('-'))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nargs {
    One,
    Optional,
    Many { at_least_one: bool },
    Exactly(usize),
}

fn nargs(o: &OptionSpec) -> Nargs {
    match &o.nargs {
        None | Some(Value::Null) => Nargs::One,
        Some(Value::String(s)) if s == "?" => Nargs::Optional,
        Some(Value::String(s)) if s == "*" => Nargs::Many {
            at_least_one: false,
        },
        Some(Value::String(s)) if s == "+" => Nargs::Many { at_least_one: true },
        Some(Value::Number(n)) => Nargs::Exactly(n.as_u64().unwrap_or(1) as usize),
        Some(_) => Nargs::One,
    }
}

/// argparse's test for a word that is a value though it starts with `-` (the parser has
/// no option that looks like a negative number).
fn is_negative_number(word: &str) -> bool {
    let Some(rest) = word.strip_prefix('-') else {
        return false;
    };
    let (int, frac) = match rest.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (rest, None),
    };
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    match frac {
        None => digits(int),
        Some(f) => (int.is_empty() || digits(int)) && digits(f),
    }
}

/// Python's `int(word)`: surrounding blanks, a sign, `_` between digits.
fn python_int(word: &str) -> Option<i64> {
    let t = word.trim();
    let (sign, digits) = match t.strip_prefix('-') {
        Some(d) => (-1, d),
        None => (1, t.strip_prefix('+').unwrap_or(t)),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.chars().all(|c| c.is_ascii_digit() || c == '_')
    {
        return None;
    }
    digits
        .replace('_', "")
        .parse::<i64>()
        .ok()
        .map(|n| sign * n)
}

fn convert(o: &OptionSpec, word: &str, converters: &[(&str, Converter)]) -> Result<Value, String> {
    let ty = o.ty.as_deref().unwrap_or("str");
    let v = match ty {
        "int" => python_int(word)
            .map(Value::from)
            .ok_or_else(|| format!("invalid int value: '{word}'"))?,
        "float" => word
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
            .or_else(|| {
                word.trim()
                    .parse::<f64>()
                    .ok()
                    .map(|f| Value::String(f.to_string()))
            })
            .ok_or_else(|| format!("invalid float value: '{word}'"))?,
        other => {
            let name = other.strip_prefix("other:").unwrap_or(other);
            match converters.iter().find(|(n, _)| *n == name) {
                Some((_, f)) => f(word, o)?,
                None => Value::String(word.to_string()),
            }
        }
    };
    if let Some(choices) = &o.choices {
        let as_text = match &v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if !choices.contains(&as_text) {
            let quoted = matches!(v, Value::String(_));
            let show = |c: &str| {
                if quoted {
                    format!("'{c}'")
                } else {
                    c.to_string()
                }
            };
            return Err(format!(
                "invalid choice: {} (choose from {})",
                show(&as_text),
                choices
                    .iter()
                    .map(|c| show(c))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CATALOG: &str = r#"{
        "program": "t", "version": "1", "allow_abbrev": true, "underscore_equivalent": false,
        "options": [
            {"flags": ["--model-path", "--model"], "dest": "model_path", "action": "store",
             "takes_value": true, "nargs": null, "type": "str", "choices": null, "required": true},
            {"flags": ["--port"], "dest": "port", "action": "store", "takes_value": true,
             "nargs": null, "type": "int", "choices": null},
            {"flags": ["--pp-size"], "dest": "pp_size", "action": "store", "takes_value": true,
             "nargs": null, "type": "int", "choices": null},
            {"flags": ["--ratio"], "dest": "ratio", "action": "store", "takes_value": true,
             "nargs": null, "type": "float", "choices": null},
            {"flags": ["--mode"], "dest": "mode", "action": "store", "takes_value": true,
             "nargs": null, "type": "str", "choices": ["null", "prefill", "decode"]},
            {"flags": ["--level"], "dest": "level", "action": "store", "takes_value": true,
             "nargs": null, "type": "int", "choices": ["0", "1"]},
            {"flags": ["--skip"], "dest": "skip", "action": "store_true", "takes_value": false,
             "nargs": 0, "type": null, "choices": null},
            {"flags": ["--fuse", "--no-fuse"], "dest": "fuse", "action": "boolean_optional",
             "takes_value": false, "nargs": 0, "type": null, "choices": null},
            {"flags": ["--ids"], "dest": "ids", "action": "store", "takes_value": true,
             "nargs": "+", "type": "int", "choices": null},
            {"flags": ["--maybe"], "dest": "maybe", "action": "store", "takes_value": true,
             "nargs": "?", "type": "str", "choices": null},
            {"flags": ["--conf"], "dest": "conf", "action": "store", "takes_value": true,
             "nargs": null, "type": "json", "choices": null}
        ]
    }"#;

    fn json_conv(word: &str, o: &OptionSpec) -> Result<Value, String> {
        serde_json::from_str(word).map_err(|e| format!("{} must be JSON: {e}", o.flags[0]))
    }

    fn p(argv: &str) -> Result<Parsed, ParseError> {
        let c = Catalog::parse_json(CATALOG).unwrap();
        let argv: Vec<String> = shlex::split(argv).unwrap();
        c.parse(&argv, &[("json", json_conv)])
    }

    fn err(argv: &str) -> String {
        match p(argv) {
            Err(ParseError::Usage(m)) => m,
            other => panic!("{argv}: expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn values_prefixes_and_forms() {
        let a = p(
            "--model /m --por 5 --pp=2 --ratio -0.5 --mode prefill --skip --no-fu \
                   --ids 1 2 3 --maybe --conf '{\"a\":1}'",
        )
        .unwrap();
        assert_eq!(a.str("model_path"), Some("/m"));
        assert_eq!(a.int("port"), Some(5));
        assert_eq!(a.int("pp_size"), Some(2));
        assert_eq!(a.get("ratio"), Some(&Value::from(-0.5)));
        assert_eq!(a.str("mode"), Some("prefill"));
        assert!(a.flag("skip", false));
        assert!(!a.flag("fuse", true));
        assert_eq!(a.get("ids"), Some(&serde_json::json!([1, 2, 3])));
        assert_eq!(a.get("maybe"), Some(&Value::Null));
        assert_eq!(a.get("conf").unwrap()["a"], 1);
        let a = p("--model-path /m --port 1 --port=2 --port ' 1_0 '").unwrap();
        assert_eq!(a.int("port"), Some(10), "the last wins; Python's int()");
    }

    #[test]
    fn refusals_read_like_argparse() {
        assert_eq!(
            err("--port 1"),
            "the following arguments are required: --model-path/--model"
        );
        assert_eq!(err("--model /m --foo"), "unrecognized arguments: --foo");
        assert_eq!(
            err("--model /m --port_x 2 stray"),
            "unrecognized arguments: --port_x 2 stray"
        );
        assert_eq!(
            err("--model /m --p 1"),
            "ambiguous option: --p could match --port, --pp-size"
        );
        assert_eq!(
            err("--model /m --skip=1"),
            "argument --skip: ignored explicit argument '1'"
        );
        assert_eq!(
            err("--model /m --no-fuse=0"),
            "argument --fuse/--no-fuse: ignored explicit argument '0'"
        );
        assert_eq!(
            err("--model /m --mode x"),
            "argument --mode: invalid choice: 'x' (choose from 'null', 'prefill', 'decode')"
        );
        assert_eq!(
            err("--model /m --level 5"),
            "argument --level: invalid choice: 5 (choose from 0, 1)"
        );
        assert_eq!(
            err("--model /m --port x"),
            "argument --port: invalid int value: 'x'"
        );
        assert_eq!(
            err("--model /m --ratio x"),
            "argument --ratio: invalid float value: 'x'"
        );
        assert_eq!(
            err("--model /m --port"),
            "argument --port: expected one argument"
        );
        assert_eq!(
            err("--model /m --port --skip"),
            "argument --port: expected one argument"
        );
        assert_eq!(
            err("--model /m --mode -x"),
            "argument --mode: expected one argument"
        );
        assert_eq!(
            err("--model /m --ids"),
            "argument --ids: expected at least one argument"
        );
        assert!(err("--model /m --conf '{x'").starts_with("argument --conf: --conf must be JSON"));
        assert_eq!(
            err("--model /m -- --port 1"),
            "unrecognized arguments: --port 1"
        );
        assert_eq!(err("--model /m -x"), "unrecognized arguments: -x");
        // Ambiguity is found before anything is consumed, as argparse classifies first.
        assert!(err("--model /m --port x --p 1").starts_with("ambiguous option"));
    }

    #[test]
    fn help_and_negative_numbers() {
        assert_eq!(p("-h"), Err(ParseError::Help));
        assert_eq!(p("--model /m --he"), Err(ParseError::Help));
        assert_eq!(p("--model /m --port -1").unwrap().int("port"), Some(-1));
        assert!(is_negative_number("-1.5") && is_negative_number("-.5"));
        assert!(!is_negative_number("-x") && !is_negative_number("-"));
        assert_eq!(python_int("+7"), Some(7));
        assert_eq!(python_int("1__0"), None);
    }
}
