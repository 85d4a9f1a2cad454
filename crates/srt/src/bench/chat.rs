//! The model's chat template, found and rendered as Hugging Face's transformers does
//! (`apply_chat_template`): the Jinja template of `chat_template.jinja` beside
//! `tokenizer_config.json`, else that file's `chat_template` (a string, or a list of
//! `{name, template}` of which `default` is used), rendered with `trim_blocks` and
//! `lstrip_blocks`, loop controls, `raise_exception`, `strftime_now`, Python's
//! `tojson` and Python's string and dict methods, given `messages`, `tools`,
//! `documents`, `add_generation_prompt` and the tokenizer's special tokens.
//!
//! srtctl's sa-bench (`use_chat_template: true`) wraps each random prompt in it as one
//! user message with the generation prompt, and sends the text as the completion prompt.

use minijinja::value::Kwargs;
use minijinja::{Environment, Error, ErrorKind, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The template's name in its environment.
const NAME: &str = "chat_template";

/// Instructions one render may execute: far above what a real template takes for one
/// message (a few thousand), so that a template that loops without end stops.
const FUEL: u64 = 5_000_000;

/// The special tokens transformers passes to a template (`special_tokens_map`).
const SPECIAL_TOKENS: [&str; 4] = ["bos_token", "eos_token", "unk_token", "pad_token"];

/// Why there is no chat template to render.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ChatTemplateError {
    /// The tokenizer's files hold no chat template.
    #[error("the tokenizer in {} has no chat template (no chat_template.jinja, no `chat_template` in tokenizer_config.json)", dir.display())]
    #[diagnostic(
        code(srt::bench::chat_template),
        help("`benchmark.use_chat_template: true` wraps every prompt in the model's chat template: set `benchmark.tokenizer` to a model directory that has one, or set `use_chat_template: false` to send prompts as they are")
    )]
    Missing {
        /// The tokenizer's directory.
        dir: PathBuf,
    },
    /// `tokenizer_config.json` names several templates and none is `default`.
    #[error("{} has named chat templates ({}) and none is `default`", file.display(), names.join(", "))]
    #[diagnostic(
        code(srt::bench::chat_template),
        help("transformers uses the template named `default`; set `benchmark.tokenizer` to a model directory whose tokenizer has one, or set `use_chat_template: false`")
    )]
    NoDefault {
        /// The tokenizer config.
        file: PathBuf,
        /// The templates' names.
        names: Vec<String>,
    },
    /// `tokenizer_config.json` is not a tokenizer config.
    #[error("{} is not a tokenizer config: {why}", file.display())]
    #[diagnostic(
        code(srt::bench::chat_template),
        help("set `benchmark.tokenizer` to the model's directory, whose tokenizer_config.json transformers reads")
    )]
    Config {
        /// The tokenizer config.
        file: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The template cannot be compiled, or fails to render a prompt.
    #[error("the chat template of {} does not render: {why}", file.display())]
    #[diagnostic(
        code(srt::bench::chat_template),
        help("srt renders it as transformers does (Jinja, with Python's string methods); correct the template, or set `benchmark.use_chat_template: false` to send prompts as they are")
    )]
    Render {
        /// Where the template was read from.
        file: PathBuf,
        /// The template engine's error.
        why: String,
    },
    /// A file could not be read.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Read(#[from] crate::input::InputError),
}

impl ChatTemplateError {
    /// The message and its help on one line, for callers whose errors are text.
    pub fn with_help(&self) -> String {
        match miette::Diagnostic::help(self) {
            Some(help) => format!("{self}; {help}"),
            None => self.to_string(),
        }
    }
}

/// A compiled chat template with what it is rendered with.
pub(super) struct ChatTemplate {
    env: Environment<'static>,
    /// Where it was read from (`chat_template.jinja` or `tokenizer_config.json`).
    pub(super) file: PathBuf,
    /// The special tokens passed to it, by name.
    tokens: BTreeMap<&'static str, String>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("file", &self.file)
            .field("tokens", &self.tokens)
            .finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// The chat template of the tokenizer whose files are in `dir`, as transformers
    /// finds it.
    pub(super) fn load(dir: &Path) -> Result<ChatTemplate, ChatTemplateError> {
        let config_file = dir.join("tokenizer_config.json");
        let config = match read_if_present(&config_file, crate::input::TOKENIZER_CONFIG)? {
            None => serde_json::Value::Object(Default::default()),
            Some(text) => serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .filter(serde_json::Value::is_object)
                .ok_or_else(|| ChatTemplateError::Config {
                    file: config_file.clone(),
                    why: "not a JSON object".into(),
                })?,
        };
        let jinja_file = dir.join("chat_template.jinja");
        let (file, source) = match read_if_present(&jinja_file, crate::input::CHAT_TEMPLATE)? {
            Some(text) => (jinja_file, text),
            None => (
                config_file.clone(),
                config_template(&config, &config_file, dir)?,
            ),
        };
        let mut tokens = BTreeMap::new();
        for name in SPECIAL_TOKENS {
            let token = match config.get(name) {
                Some(serde_json::Value::String(s)) => Some(s.clone()),
                Some(serde_json::Value::Object(o)) => o
                    .get("content")
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_string),
                _ => None,
            };
            if let Some(t) = token {
                tokens.insert(name, t);
            }
        }
        ChatTemplate::new(file, source, tokens)
    }

    /// `source` compiled in transformers' environment.
    fn new(
        file: PathBuf,
        source: String,
        tokens: BTreeMap<&'static str, String>,
    ) -> Result<ChatTemplate, ChatTemplateError> {
        let mut env = Environment::new();
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .expect("the default delimiters are valid");
        env.set_syntax(syntax);
        env.set_fuel(Some(FUEL));
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_filter("tojson", tojson);
        env.add_template_owned(NAME, source)
            .map_err(|e| ChatTemplateError::Render {
                file: file.clone(),
                why: describe(&e),
            })?;
        Ok(ChatTemplate { env, file, tokens })
    }

    /// The text of one user message `content` with the generation prompt
    /// (`apply_chat_template([{"role": "user", "content": content}],
    /// add_generation_prompt=True, tokenize=False)`).
    pub(super) fn render_user(&self, content: &str) -> Result<String, ChatTemplateError> {
        let message = Value::from_pairs([
            ("role", Value::from("user")),
            ("content", Value::from(content)),
        ]);
        let ctx = Value::from_pairs(
            [
                ("messages", Value::from(vec![message])),
                ("tools", Value::from(())),
                ("documents", Value::from(())),
                ("add_generation_prompt", Value::from(true)),
            ]
            .into_iter()
            .chain(
                self.tokens
                    .iter()
                    .map(|(k, v)| (*k, Value::from(v.as_str()))),
            ),
        );
        self.env
            .get_template(NAME)
            .and_then(|t| t.render(ctx))
            .map_err(|e| ChatTemplateError::Render {
                file: self.file.clone(),
                why: describe(&e),
            })
    }
}

/// The text of the file at `path`, or `None` when there is none.
fn read_if_present(
    path: &Path,
    input: crate::input::Input,
) -> Result<Option<String>, ChatTemplateError> {
    match crate::input::read_text(path, input) {
        Ok(text) => Ok(Some(text)),
        Err(crate::input::InputError::Read { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// `chat_template` of a tokenizer config: a string, or the `default` of named ones.
fn config_template(
    config: &serde_json::Value,
    file: &Path,
    dir: &Path,
) -> Result<String, ChatTemplateError> {
    let bad = |why: &str| ChatTemplateError::Config {
        file: file.to_path_buf(),
        why: why.into(),
    };
    match config.get("chat_template") {
        None | Some(serde_json::Value::Null) => Err(ChatTemplateError::Missing {
            dir: dir.to_path_buf(),
        }),
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(serde_json::Value::Array(items)) => {
            let mut names = Vec::new();
            for item in items {
                let (Some(name), Some(template)) = (
                    item.get("name").and_then(serde_json::Value::as_str),
                    item.get("template").and_then(serde_json::Value::as_str),
                ) else {
                    return Err(bad(
                        "`chat_template` lists an entry without a `name` and a `template`",
                    ));
                };
                if name == "default" {
                    return Ok(template.to_string());
                }
                names.push(name.to_string());
            }
            if names.is_empty() {
                return Err(ChatTemplateError::Missing {
                    dir: dir.to_path_buf(),
                });
            }
            Err(ChatTemplateError::NoDefault {
                file: file.to_path_buf(),
                names,
            })
        }
        Some(_) => Err(bad(
            "`chat_template` is neither a template nor a list of named templates",
        )),
    }
}

/// A template error with its place and causes.
fn describe(e: &Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s.push_str(&format!(": {inner}"));
        src = inner.source();
    }
    s
}

/// transformers' `raise_exception(message)`: the template refuses its input.
fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// transformers' `tojson`: Python's `json.dumps(x, ensure_ascii=False, indent=None,
/// sort_keys=False)` (not Jinja's HTML-escaping one).
fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let style = JsonStyle {
        indent,
        ensure_ascii: ensure_ascii.unwrap_or(false),
        sort_keys: sort_keys.unwrap_or(false),
    };
    let mut out = String::new();
    style.write(value, 0, &mut out)?;
    Ok(Value::from_safe_string(out))
}

/// How Python's `json.dumps` lays out a value.
struct JsonStyle {
    indent: Option<usize>,
    ensure_ascii: bool,
    sort_keys: bool,
}

impl JsonStyle {
    fn write(&self, v: &Value, depth: usize, out: &mut String) -> Result<(), Error> {
        use minijinja::value::ValueKind;
        match v.kind() {
            ValueKind::Undefined | ValueKind::None => out.push_str("null"),
            ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
            ValueKind::Number => out.push_str(&python_number(v)),
            ValueKind::String => self.string(v.as_str().unwrap_or_default(), out),
            ValueKind::Map => {
                let mut keys: Vec<Value> = v.try_iter()?.collect();
                if self.sort_keys {
                    keys.sort();
                }
                let items = keys
                    .into_iter()
                    .map(|k| {
                        let item = v.get_item(&k)?;
                        Ok((k, item))
                    })
                    .collect::<Result<Vec<_>, Error>>()?;
                self.container(('{', '}'), items.len(), depth, out, |i, out| {
                    let (k, item) = &items[i];
                    match k.as_str() {
                        Some(s) => self.string(s, out),
                        None => self.string(&k.to_string(), out),
                    }
                    out.push_str(": ");
                    self.write(item, depth + 1, out)
                })?;
            }
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = v.try_iter()?.collect();
                self.container(('[', ']'), items.len(), depth, out, |i, out| {
                    self.write(&items[i], depth + 1, out)
                })?;
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("{} is not JSON serializable", v.kind()),
                ))
            }
        }
        Ok(())
    }

    /// `[a, b]` or, indented, one item a line.
    fn container(
        &self,
        (open, close): (char, char),
        n: usize,
        depth: usize,
        out: &mut String,
        mut item: impl FnMut(usize, &mut String) -> Result<(), Error>,
    ) -> Result<(), Error> {
        out.push(open);
        if n == 0 {
            out.push(close);
            return Ok(());
        }
        for i in 0..n {
            match self.indent {
                Some(w) => {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push('\n');
                    out.push_str(&" ".repeat(w * (depth + 1)));
                }
                None if i > 0 => out.push_str(", "),
                None => {}
            }
            item(i, out)?;
        }
        if let Some(w) = self.indent {
            out.push('\n');
            out.push_str(&" ".repeat(w * depth));
        }
        out.push(close);
        Ok(())
    }

    fn string(&self, s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 || (self.ensure_ascii && !c.is_ascii()) => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{u:04x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
}

/// A number as Python's `repr` writes it: integers plainly, floats with a point or an
/// exponent (`1.0`, `1e+16`).
fn python_number(v: &Value) -> String {
    if v.is_integer() {
        return v.to_string();
    }
    let Ok(x) = f64::try_from(v.clone()) else {
        return v.to_string();
    };
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let a = x.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        let s = format!("{x:e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let (sign, digits) = match exp.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', exp),
        };
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    format!("{x:?}")
}

/// transformers' `strftime_now(format)`: the time now (UTC here) in a `strftime`
/// format. Llama 3's templates date their system prompt with it.
fn strftime_now(format: String) -> Result<Value, Error> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    strftime(&format, now).map(Value::from)
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// `format` for the UTC time `secs` after the epoch: the C library's conversions of
/// dates and times (`%Y %m %d %H %M %S %y %b %B %a %A %j %I %p %%`, and glibc's `%-d`
/// without padding).
fn strftime(format: &str, secs: u64) -> Result<String, Error> {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (hour, minute, second) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let (year, month, day) = civil(days as i64);
    let weekday = ((days + 4) % 7) as usize;
    let yday = days as i64 - days_from_civil(year, 1, 1) + 1;
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = chars.next();
        let pad = spec != Some('-');
        if !pad {
            spec = chars.next();
        }
        let num = |n: i64, width: usize| {
            if pad {
                format!("{n:0width$}")
            } else {
                n.to_string()
            }
        };
        let hour12 = match hour % 12 {
            0 => 12,
            h => h,
        };
        let text = match spec {
            Some('Y') => year.to_string(),
            Some('y') => num(year.rem_euclid(100), 2),
            Some('m') => num(month as i64, 2),
            Some('d') => num(day as i64, 2),
            Some('e') => format!("{day:>2}"),
            Some('H') => num(hour as i64, 2),
            Some('I') => num(hour12 as i64, 2),
            Some('M') => num(minute as i64, 2),
            Some('S') => num(second as i64, 2),
            Some('j') => num(yday, 3),
            Some('p') => if hour < 12 { "AM" } else { "PM" }.to_string(),
            Some('b') => MONTHS[month as usize - 1][..3].to_string(),
            Some('B') => MONTHS[month as usize - 1].to_string(),
            Some('a') => WEEKDAYS[weekday][..3].to_string(),
            Some('A') => WEEKDAYS[weekday].to_string(),
            Some('%') => "%".to_string(),
            other => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!(
                        "strftime_now: the conversion %{} is not supported",
                        other.map(String::from).unwrap_or_default()
                    ),
                ))
            }
        };
        out.push_str(&text);
    }
    Ok(out)
}

/// The date of `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Days from 1970-01-01 to a date (`days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The tiny test model's directory (`chat_template.jinja` beside its
    /// `tokenizer_config.json`).
    fn tiny_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/tiny-model")
    }

    /// A model directory whose `tokenizer_config.json` is the tiny model's with `extra`
    /// merged in (and `chat_template.jinja` holding `jinja`, when given).
    pub(in crate::bench) fn model_dir(
        extra: serde_json::Value,
        jinja: Option<&str>,
    ) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(
            tiny_dir().join("tokenizer.json"),
            dir.path().join("tokenizer.json"),
        )
        .unwrap();
        let mut config: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(tiny_dir().join("tokenizer_config.json")).unwrap(),
        )
        .unwrap();
        for (k, v) in extra.as_object().unwrap() {
            config[k] = v.clone();
        }
        std::fs::write(dir.path().join("tokenizer_config.json"), config.to_string()).unwrap();
        if let Some(j) = jinja {
            std::fs::write(dir.path().join("chat_template.jinja"), j).unwrap();
        }
        dir
    }

    /// A template using what Hugging Face templates use: `namespace`, `loop`,
    /// `raise_exception`, Python's `.strip()`, `.startswith()` and `.lstrip()`, slices,
    /// `trim`, `tojson`, `tools`, special tokens (`bos_token` as an object), and block
    /// tags on their own indented lines (`trim_blocks`, `lstrip_blocks`).
    pub(in crate::bench) const RICH: &str = r#"{%- if messages[0]['role'] == 'system' %}
    {%- set system = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set system = '  You are a helpful assistant.  ' %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- set ns = namespace(count=0, last='') %}
{% for message in loop_messages %}
    {% if message['role'] not in ['user', 'assistant'] %}
        {{- raise_exception('Conversation roles must be user or assistant') }}
    {% endif %}
    {% set ns.count = ns.count + 1 %}
    {% if loop.first %}
<|system|>{{ system | trim }}{{ eos_token }}
    {% endif %}
    {% set content = message['content'].strip() %}
    {% if content.startswith('/think') %}
        {% set content = content[6:].lstrip() %}
    {% endif %}
<|{{ message['role'] }}|>
{{ content }}{{ eos_token }}
    {% if loop.last %}{% set ns.last = message['role'] %}{% endif %}
{% endfor %}
{% if tools is not none %}{{ raise_exception('no tools here') }}{% endif %}
{% if add_generation_prompt and ns.last == 'user' %}
<|assistant|>{{ {'turns': ns.count, 'last': ns.last, 'x': [1, 2.5, none, true, 'é"q\n']} | tojson }}
{% endif %}
"#;

    /// Expected texts are transformers 5.24.0's (the dynamo venv under `.tools`, Jinja2
    /// 3.1.6): `AutoTokenizer.from_pretrained(dir).apply_chat_template([{"role":
    /// "user", "content": C}], add_generation_prompt=True, tokenize=False)` on the same
    /// files.
    #[test]
    fn the_tiny_models_template_renders_as_transformers_renders_it() {
        let t = ChatTemplate::load(&tiny_dir()).unwrap();
        assert!(t.file.ends_with("chat_template.jinja"), "{t:?}");
        assert_eq!(t.render_user("a").unwrap(), "user: a\nassistant: ");
        assert_eq!(
            t.render_user("The quick brown fox").unwrap(),
            "user: The quick brown fox\nassistant: "
        );
        assert_eq!(
            t.render_user("  padded text\n").unwrap(),
            "user:   padded text\n\nassistant: "
        );
        // The bound on a render's work leaves room for the longest prompts (4 MiB of
        // text, about a million tokens), through Python's string methods too.
        let long = "word ".repeat(800 << 10);
        assert_eq!(t.render_user(&long).unwrap().len(), long.len() + 18);
        let dir = model_dir(serde_json::json!({"chat_template": RICH}), None);
        let rich = ChatTemplate::load(dir.path()).unwrap();
        assert!(rich.render_user(&long).unwrap().contains(long.trim()));
    }

    /// As above, for [`RICH`] in `tokenizer_config.json` with `bos_token` an
    /// `AddedToken` object.
    #[test]
    fn a_template_in_the_config_renders_as_transformers_renders_it() {
        let dir = model_dir(
            serde_json::json!({
                "chat_template": RICH,
                "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false,
                              "rstrip": false, "normalized": false, "single_word": false,
                              "special": true},
            }),
            None,
        );
        let t = ChatTemplate::load(dir.path()).unwrap();
        assert!(t.file.ends_with("tokenizer_config.json"), "{t:?}");
        assert_eq!(
            t.render_user("  /think  Hello there \n").unwrap(),
            "<s><|system|>You are a helpful assistant.</s>\n<|user|>\nHello there</s>\n<|assistant|>{\"turns\": 1, \"last\": \"user\", \"x\": [1, 2.5, null, true, \"\u{e9}\\\"q\\n\"]}\n"
        );
    }

    /// A list of named templates: `default` is used, as transformers uses it.
    #[test]
    fn the_default_of_named_templates_is_used() {
        let dir = model_dir(
            serde_json::json!({"chat_template": [
                {"name": "tool_use", "template": "TOOLS"},
                {"name": "default", "template": "{{ eos_token }}[{{ messages[0].content }}]"},
            ]}),
            None,
        );
        let t = ChatTemplate::load(dir.path()).unwrap();
        // transformers 5.24.0: "</s>[x y]".
        assert_eq!(t.render_user("x y").unwrap(), "</s>[x y]");
    }

    /// `chat_template.jinja` wins over the config's template, as in transformers.
    #[test]
    fn the_jinja_file_wins_over_the_config() {
        let dir = model_dir(
            serde_json::json!({"chat_template": "config: {{ messages[0].content }}"}),
            Some("file: {{ messages[0].content }}\n"),
        );
        let t = ChatTemplate::load(dir.path()).unwrap();
        assert_eq!(t.render_user("hi").unwrap(), "file: hi");
    }

    #[test]
    fn a_tokenizer_without_a_template_is_refused() {
        let dir = model_dir(serde_json::json!({}), None);
        let e = ChatTemplate::load(dir.path()).unwrap_err();
        assert!(matches!(e, ChatTemplateError::Missing { .. }), "{e:?}");
        assert!(
            e.to_string().contains("has no chat template")
                && e.with_help().contains("use_chat_template: false"),
            "{}",
            e.with_help()
        );
        // No tokenizer_config.json at all.
        let empty = tempfile::tempdir().unwrap();
        let e = ChatTemplate::load(empty.path()).unwrap_err();
        assert!(matches!(e, ChatTemplateError::Missing { .. }), "{e:?}");
        // Named templates without a default.
        let dir = model_dir(
            serde_json::json!({"chat_template": [{"name": "rag", "template": "x"}]}),
            None,
        );
        let e = ChatTemplate::load(dir.path()).unwrap_err();
        assert!(
            matches!(&e, ChatTemplateError::NoDefault { names, .. } if names == &["rag"]),
            "{e:?}"
        );
        let dir = model_dir(serde_json::json!({"chat_template": 3}), None);
        let e = ChatTemplate::load(dir.path()).unwrap_err();
        assert!(matches!(e, ChatTemplateError::Config { .. }), "{e:?}");
    }

    /// A template that does not compile, one that raises on the prompt (transformers:
    /// `TemplateError: Conversation roles must be user or assistant` for RICH on a
    /// `tool` message), and one that loops without end are errors, not texts.
    #[test]
    fn templates_that_do_not_render_are_errors() {
        let dir = model_dir(serde_json::json!({}), Some("{% for m in messages %}"));
        let e = ChatTemplate::load(dir.path()).unwrap_err();
        assert!(matches!(e, ChatTemplateError::Render { .. }), "{e:?}");
        assert!(e.to_string().contains("chat_template.jinja"), "{e}");
        let dir = model_dir(
            serde_json::json!({}),
            Some("{{ raise_exception('Conversation roles must be user or assistant') }}"),
        );
        let e = ChatTemplate::load(dir.path())
            .unwrap()
            .render_user("a")
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("Conversation roles must be user or assistant"),
            "{e}"
        );
        let dir = model_dir(
            serde_json::json!({}),
            Some(
                "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            ),
        );
        let e = ChatTemplate::load(dir.path())
            .unwrap()
            .render_user("a")
            .unwrap_err();
        assert!(
            matches!(e, ChatTemplateError::Render { .. }) && e.to_string().contains("out of fuel"),
            "{e:?}"
        );
    }

    /// A template that is no regular file is refused without reading.
    #[test]
    fn a_template_that_is_a_device_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("chat_template.jinja")).unwrap();
        let e = ChatTemplate::load(dir.path()).unwrap_err();
        assert!(e.to_string().contains("is a character device"), "{e}");
    }

    /// Python's `json.dumps` (3.11) of the same values: `{"a": [1, 2.5, None, True,
    /// 'é"q\n\x01'], "b": {}, "c": []}` with `ensure_ascii=False`; with `indent=2`;
    /// `["é😀"]` with `ensure_ascii=True`.
    #[test]
    fn tojson_is_pythons() {
        let env = {
            let dir = model_dir(serde_json::json!({}), Some("x"));
            ChatTemplate::load(dir.path()).unwrap().env
        };
        let render = |src: &str| env.render_str(src, ()).unwrap();
        assert_eq!(
            render(r#"{{ {'a': [1, 2.5, none, true, 'é"q\n\x01'], 'b': {}, 'c': []} | tojson }}"#),
            "{\"a\": [1, 2.5, null, true, \"\u{e9}\\\"q\\n\\u0001\"], \"b\": {}, \"c\": []}"
        );
        assert_eq!(
            render("{{ {'a': [1, {'z': 1e16}], 'b': {}, 'c': [0.0001, 1.5e-05]} | tojson(indent=2) }}"),
            "{\n  \"a\": [\n    1,\n    {\n      \"z\": 1e+16\n    }\n  ],\n  \"b\": {},\n  \"c\": [\n    0.0001,\n    1.5e-05\n  ]\n}"
        );
        assert_eq!(
            render("{{ ['é😀'] | tojson(ensure_ascii=true) }}"),
            "[\"\\u00e9\\ud83d\\ude00\"]"
        );
    }

    /// Python's `time.strftime(F, time.gmtime(T))` for the same formats and times.
    #[test]
    fn strftime_is_the_c_librarys() {
        assert_eq!(
            strftime(
                "%d %b %Y|%-d %B %y %H:%M:%S %I%p %a %A %j %%",
                1_767_225_599
            )
            .unwrap(),
            "31 Dec 2025|31 December 25 23:59:59 11PM Wed Wednesday 365 %"
        );
        assert_eq!(
            strftime("%d %b %Y %j %a", 951_782_400).unwrap(),
            "29 Feb 2000 060 Tue"
        );
        assert!(strftime("%Q", 0).is_err());
    }
}
