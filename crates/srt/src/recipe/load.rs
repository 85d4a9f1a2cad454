//! From YAML text to a typed [`Recipe`], collecting every problem with its span.

use super::diag::{did_you_mean, Problem, Problems, RecipeError};
use super::keys;
use super::model::*;
use super::srtctl::{self, Selection};
use super::yaml::{self, Key, Node, Value};
use miette::{NamedSource, SourceSpan};
use std::collections::BTreeMap;

mod runtime;

/// The highest concurrency a benchmark level may have.
const MAX_LEVEL: u32 = 100_000;

/// A benchmark's concurrency level, a number or text (srtctl joins levels as text:
/// `['8192']` is a level too), from 1 to [`MAX_LEVEL`].
fn level(value: &Value) -> Option<u32> {
    match value {
        Value::Int(i) => u32::try_from(*i)
            .ok()
            .filter(|l| (1..=MAX_LEVEL).contains(l)),
        Value::Str(s) => level_text(s),
        _ => None,
    }
}

/// A concurrency level written as text.
fn level_text(text: &str) -> Option<u32> {
    text.parse().ok().filter(|l| (1..=MAX_LEVEL).contains(l))
}

/// Keys srtctl understands that srt deliberately does not: named in a clear error
/// instead of being silently ignored.
const SRTCTL_ONLY_TOP: &[&str] = &[
    "output",
    "observability",
    "telemetry",
    "services",
    "post_eval",
    "reporting",
    "base",
];
const SRTCTL_ONLY_ROLE: &[&str] = &["engine", "kv_events", "sidecar", "critical"];
const SRTCTL_ONLY_ENGINE: &[&str] = &["set_visible_devices", "failover", "sequential_node_start"];
const SRTCTL_ONLY_FRONTEND: &[&str] = &["placement", "nginx_keepalive_timeout"];
const SRTCTL_ONLY_RESOURCES: &[&str] = &[
    "het_jobs",
    "prefill_critical",
    "decode_critical",
    "agg_critical",
    "prefill_nodes",
    "decode_nodes",
];

/// srtctl keys accepted at one value: the one that asks for what srt does anyway
/// (`resources.het_jobs: false`, srtctl's default: one ordinary job). Any other value
/// is refused as the key's others are.
const SRTCTL_AS_SRT: &[(&str, bool)] = &[("het_jobs", false)];

/// The engine key srt reads itself (a layout rule), not the engine.
const COLOCATION: &str = "allow_prefill_decode_colocation";

/// srtctl's default `frontend.nginx_session_affinity_header`.
const SRTCTL_SESSION_HEADER: &str = "X-Dynamo-Session-ID";

/// The open-file limit srtctl's `nginx_raise_ulimit: true` gives nginx.
const SRTCTL_RAISED_NOFILE: u32 = 1_048_576;

/// The largest recipe accepted, in bytes. Real recipes are a few kilobytes; a bound keeps
/// a mistaken path (a log, a model file) from being read whole and parsed.
pub const MAX_RECIPE_BYTES: usize = 1024 * 1024;

/// The longest line accepted, in bytes. Diagnostics draw the line they point into, and
/// the renderer cannot place a label past column 65535 (it panics): with lines bounded
/// at 8 KiB every label lands well before that, even with tabs or wide characters.
pub const MAX_LINE_BYTES: usize = 8 * 1024;

/// A recipe file's text and display name, kept for diagnostics after loading.
#[derive(Clone, Debug)]
pub struct Source {
    /// File name as given by the user.
    pub name: String,
    /// Full text.
    pub text: String,
}

impl Source {
    /// Wrap problems found in this source into a renderable error.
    ///
    /// What is shown is safe to print: secret values (sensitive variables, secret-like
    /// flags) are masked in the excerpt and in every message, and control characters
    /// (ESC, BEL, CR...) are shown escaped, with the spans moved along.
    pub fn error(&self, problems: Vec<Problem>) -> RecipeError {
        let mut problems = problems;
        for p in &mut problems {
            keep_drawable(&self.text, p);
        }
        problems.sort_by_key(|p| p.span.offset());
        let mut secrets = secret_spans(&self.text);
        secrets.extend(problems.iter().filter_map(|p| p.secret.as_deref().copied()));
        let mut text = self.text.clone();
        for span in &secrets {
            let range = span.offset()..span.offset() + span.len();
            if let Some(value) = self.text.get(range.clone()) {
                for p in &mut problems {
                    mask_in(p, value);
                }
                text.replace_range(range, &"*".repeat(value.len()));
            }
        }
        let (text, offsets) = crate::term::escape_with_offsets(&text);
        for p in &mut problems {
            let start = offsets.map(p.span.offset());
            let end = offsets.map(p.span.offset() + p.span.len());
            p.span = SourceSpan::new(start.into(), end - start);
            p.message = crate::term::escape_line(&p.message).into_owned();
            p.label = crate::term::escape_line(&p.label).into_owned();
            p.help = p
                .help
                .as_deref()
                .map(|h| crate::term::escape(h).into_owned());
        }
        RecipeError {
            source_code: NamedSource::new(crate::term::escape_line(&self.name), text),
            problems,
        }
    }
}

/// Replaces `secret` in a problem's texts (a message may quote the value it is about).
fn mask_in(p: &mut Problem, secret: &str) {
    if secret.is_empty() {
        return;
    }
    let mask = |t: &str| t.replace(secret, crate::secrets::MASK);
    p.message = mask(&p.message);
    p.label = mask(&p.label);
    p.help = p.help.as_deref().map(mask);
}

/// Spans of the secret values in a recipe's text, to mask in diagnostics: the values of
/// sensitive variables (the default list and the recipe's `sensitive_env`) in any `env`
/// mapping, and of secret-like flags in any `args` mapping. Read from the YAML tree
/// when the text parses; a line-based reading covers text that does not (`KEY: value`
/// lines whose key is sensitive), so a syntax error next to a token does not show it.
fn secret_spans(text: &str) -> Vec<SourceSpan> {
    let mut spans = Vec::new();
    if let Ok(root) = yaml::parse(text) {
        let mut extra: Vec<String> = Vec::new();
        if let Value::Map(top) = &root.value {
            for (k, v) in top {
                if let (true, Value::Seq(items)) = (k.name == "sensitive_env", &v.value) {
                    extra.extend(items.iter().filter_map(|n| match &n.value {
                        Value::Str(s) => Some(s.clone()),
                        _ => None,
                    }));
                }
            }
        }
        let sensitive = |name: &str| {
            crate::secrets::is_sensitive(name)
                || crate::secrets::is_sensitive(&name.replace('-', "_"))
                || extra.iter().any(|e| e == name)
        };
        fn walk(
            node: &Node,
            parent: &str,
            sensitive: &dyn Fn(&str) -> bool,
            out: &mut Vec<SourceSpan>,
        ) {
            match &node.value {
                Value::Map(entries) => {
                    for (k, v) in entries {
                        let secret_slot =
                            (parent == "env" || parent == "args") && sensitive(&k.name);
                        if secret_slot && !matches!(v.value, Value::Map(_) | Value::Seq(_)) {
                            if !v.span.is_empty() {
                                out.push(v.span);
                            }
                        } else {
                            walk(v, &k.name, sensitive, out);
                        }
                    }
                }
                Value::Seq(items) => items.iter().for_each(|n| walk(n, parent, sensitive, out)),
                _ => {}
            }
        }
        walk(&root, "", &sensitive, &mut spans);
    }
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let trimmed = body.trim_start_matches([' ', '\t', '-']);
        if let Some((key, value)) = trimmed.split_once(':') {
            let key = key.trim().trim_matches(['"', '\'']);
            let value_trim = value.trim();
            let looks_like_key = !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if looks_like_key
                && !value_trim.is_empty()
                && crate::secrets::is_sensitive(&key.replace('-', "_"))
            {
                let value_start = body.len() - value.len() + value.len() - value.trim_start().len();
                let start = offset + value_start;
                let len = value_trim.len();
                if !spans
                    .iter()
                    .any(|s| s.offset() <= start && start < s.offset() + s.len().max(1))
                {
                    spans.push(SourceSpan::new(start.into(), len));
                }
            }
        }
        offset += line.len();
    }
    spans.sort_by_key(miette::SourceSpan::offset);
    spans.dedup();
    spans
}

/// Keeps a problem's span where the renderer can draw it: on a character boundary, and
/// no further than [`MAX_LINE_BYTES`] into its line (the renderer panics on a label past
/// column 65535). A span further right moves to the start of its line, and the label
/// says the column.
fn keep_drawable(text: &str, p: &mut Problem) {
    let offset = p.span.offset().min(text.len());
    let mut at = offset;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let column = at - line_start;
    if column > MAX_LINE_BYTES {
        p.label = format!("{} (column {})", p.label, column + 1);
        at = line_start;
    } else if at == offset {
        return;
    }
    let len = text[at..]
        .chars()
        .next()
        .filter(|&c| c != '\n')
        .map_or(0, char::len_utf8);
    p.span = SourceSpan::new(at.into(), len);
}

/// A request rate written as a string (`"300"`, `"2.5"`): the positive finite number.
fn rate_number(s: &str) -> Option<f64> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// Load a recipe from text. `default_name` names the deployment when `name:` is absent
/// (the CLI passes the file stem).
pub fn load_str(source: &Source, default_name: &str) -> Result<Recipe, RecipeError> {
    load_selected(source, default_name, &Selection::default())
}

/// [`load_str`] of the recipe `selection` picks from an srtctl override file.
pub fn load_selected(
    source: &Source,
    default_name: &str,
    selection: &Selection,
) -> Result<Recipe, RecipeError> {
    if let Some(err) = oversized(source) {
        return Err(err);
    }
    problems_of(source, default_name, selection, 0).map_err(|p| source.error(p))
}

/// [`load_selected`] of the sweep's point `index` (from 0; the recipe itself for a file
/// without `sweep:`, whatever `index`), with the problems as found. A point past the
/// last is the last.
pub fn load_point(
    source: &Source,
    default_name: &str,
    selection: &Selection,
    index: usize,
) -> Result<Recipe, Vec<Problem>> {
    problems_of(source, default_name, selection, index)
}

/// [`load_str`], with the problems as found: spans into `source.text`, nothing masked
/// or escaped yet ([`Source::error`] does that for display). A file over the size
/// limits yields its (already rendered) problem.
pub fn load_problems(source: &Source, default_name: &str) -> Result<Recipe, Vec<Problem>> {
    problems_of(source, default_name, &Selection::default(), 0)
}

fn problems_of(
    source: &Source,
    default_name: &str,
    selection: &Selection,
    index: usize,
) -> Result<Recipe, Vec<Problem>> {
    if let Some(err) = oversized(source) {
        return Err(err.problems);
    }
    let whole = SourceSpan::new(0.into(), source.text.len().min(1));
    if source.text.trim().is_empty() {
        return Err(vec![Problem::new(
            "srt::recipe::empty",
            whole,
            "the recipe is empty",
        )
        .help(
            "a recipe needs at least `roles:`; see docs/recipe-reference.md",
        )]);
    }
    let root = match yaml::parse(&source.text) {
        Ok(root) => root,
        Err(err) => return Err(vec![syntax_problem(&err, &source.text)]),
    };
    if root.value == Value::Null {
        // Only comments (or `~`): as empty as a blank file.
        return Err(vec![Problem::new(
            "srt::recipe::empty",
            whole,
            "the recipe is empty",
        )
        .help(
            "a recipe needs at least `roles:`; see docs/recipe-reference.md",
        )]);
    }
    let tagged: Vec<Problem> = yaml::tags(&source.text)
        .into_iter()
        .map(|t| {
            Problem::new(
                "srt::recipe::yaml_tag",
                t.span,
                format!("YAML tag `{}` is not allowed in a recipe", t.tag),
            )
            .label("tagged value")
            .help(
                "remove the tag: srt reads plain YAML 1.2 values and neither ignores nor \
                 interprets tags (quote a value to make it a string)",
            )
        })
        .collect();
    if !tagged.is_empty() {
        return Err(tagged);
    }
    let nul = nul_bytes(&root);
    if !nul.is_empty() {
        return Err(nul);
    }
    let (root, mut notes) = srtctl::variant(root, selection)?;
    let sweep = super::sweep::Sweep::new(&root)?;
    notes.extend(sweep.warnings.iter().cloned());
    let index = index.min(sweep.len() - 1);
    let chosen = sweep.point(index);
    let point = sweep.key().map(|key| SweepPoint {
        key,
        index,
        of: sweep.len(),
        params: chosen.describe(),
        unfit: None,
    });
    let mut recipe =
        point_recipe(&chosen.recipe, source, default_name, notes).map_err(|mut p| {
            p.extend(point.as_ref().map(super::sweep::read_as));
            p
        })?;
    recipe.sweep = point;
    Ok(recipe)
}

/// The typed recipe of a parsed document without `sweep:` (a point of a sweep,
/// [`super::sweep::Point::recipe`], whose spans are in the file's text); srtctl's v1
/// layout is re-spelled as 2.0 first ([`srtctl::migrate_tree`]).
/// `source` is the file the tree was read from: paths in it are relative to its
/// directory.
pub fn load_tree(root: &Node, source: &Source, default_name: &str) -> Result<Recipe, Vec<Problem>> {
    point_recipe(root, source, default_name, Vec::new())
}

/// [`load_tree`], after `notes` (what was done to the file before).
fn point_recipe(
    root: &Node,
    source: &Source,
    default_name: &str,
    mut notes: Vec<Problem>,
) -> Result<Recipe, Vec<Problem>> {
    let mut root = root.clone();
    notes.extend(srtctl::migrate_tree(&mut root));
    let root = &root;
    let mut problems = Problems::default();
    let recipe = Loader {
        problems: &mut problems,
        dir: std::path::Path::new(&source.name)
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default(),
    }
    .recipe(root, default_name);
    match recipe {
        Some(mut r) if problems.is_empty() => {
            r.notes = notes;
            Ok(r)
        }
        _ => {
            problems.0.extend(notes);
            if problems.is_empty() {
                problems.push(Problem::new(
                    "srt::recipe::invalid",
                    root.span,
                    "the recipe is invalid",
                ));
            }
            Err(problems.0)
        }
    }
}

/// The YAML 1.2 boolean a YAML 1.1 boolean spelling (`yes`, `No`, `OFF`, `y`...) meant,
/// for hints: YAML 1.2 reads these as strings.
pub(crate) fn yaml11_boolean(s: &str) -> Option<&'static str> {
    match s.to_ascii_lowercase().as_str() {
        "yes" | "y" | "on" => Some("true"),
        "no" | "n" | "off" => Some("false"),
        _ => None,
    }
}

/// Strings holding a NUL byte (written as `"\0"` in YAML): no argv token or
/// environment value can carry one, so such a recipe could only be rendered wrong and
/// fail at launch. Every occurrence is reported, in keys and values.
fn nul_bytes(root: &Node) -> Vec<Problem> {
    fn walk(node: &Node, out: &mut Vec<Problem>) {
        let problem = |span| {
            Problem::new(
                "srt::recipe::nul_byte",
                span,
                "a string in the recipe contains a NUL byte",
            )
            .label("NUL byte in here")
            .help("command-line arguments and environment values cannot contain NUL (`\\0`); remove it")
        };
        match &node.value {
            Value::Str(s) if s.contains('\0') => out.push(problem(node.span)),
            Value::Seq(items) => items.iter().for_each(|n| walk(n, out)),
            Value::Map(entries) => {
                for (k, v) in entries {
                    if k.name.contains('\0') {
                        out.push(problem(k.span));
                    }
                    walk(v, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(root, &mut out);
    out
}

/// A recipe with a line longer than [`MAX_LINE_BYTES`] (checked first, within the
/// size limit) or longer than [`MAX_RECIPE_BYTES`]. The diagnostic shows the text up to
/// the character past the limit and points at that character, so it never draws an
/// overlong line.
fn oversized(source: &Source) -> Option<RecipeError> {
    let text = &source.text;
    let scanned = &text.as_bytes()[..text.len().min(MAX_RECIPE_BYTES + 1)];
    let mut line_start = 0;
    for line in scanned.split(|&b| b == b'\n') {
        if line.len() > MAX_LINE_BYTES {
            return Some(cut_error(
                source,
                line_start + MAX_LINE_BYTES,
                Problem::new(
                    "srt::recipe::long_line",
                    SourceSpan::new(0.into(), 0),
                    format!("a line of the recipe is longer than {MAX_LINE_BYTES} bytes"),
                )
                .label("the line goes on past the limit")
                .help("split the value over several lines (a block scalar `|`, or a flow mapping over several lines)"),
            ));
        }
        line_start += line.len() + 1;
    }
    (text.len() > MAX_RECIPE_BYTES).then(|| {
        cut_error(
            source,
            MAX_RECIPE_BYTES,
            Problem::new(
                "srt::recipe::too_large",
                SourceSpan::new(0.into(), 0),
                format!("the recipe is larger than {MAX_RECIPE_BYTES} bytes"),
            )
            .label("the limit is reached here")
            .help("is this the right file? a recipe is a short YAML document"),
        )
    })
}

/// `problem` pointing at the character at byte `at` of the source (or the one it is
/// inside of), rendered against the source cut just after that character.
fn cut_error(source: &Source, at: usize, mut problem: Problem) -> RecipeError {
    let text = &source.text;
    let mut start = at.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let len = text[start..].chars().next().map_or(0, char::len_utf8);
    problem.span = SourceSpan::new(start.into(), len);
    Source {
        name: source.name.clone(),
        text: text[..start + len].to_string(),
    }
    .error(vec![problem])
}

fn syntax_problem(err: &serde_saphyr::Error, text: &str) -> Problem {
    let problem = yaml::syntax_problem(
        err,
        text,
        "srt::recipe::syntax",
        "srt::recipe::duplicate_key",
    );
    if problem.message.contains("limits breached") || problem.message.contains("recursion limit") {
        // A budget of the parser: say which bounds exist rather than leave a bare name.
        return problem.help(format!(
            "srt refuses recipes nested deeper than {} levels, with more than 250000 \
             values, or whose aliases expand past the parser's budget",
            yaml::MAX_DEPTH
        ));
    }
    problem
}

struct Loader<'p> {
    problems: &'p mut Problems,
    /// The recipe's directory: what relative script paths are read from.
    dir: std::path::PathBuf,
}

/// The entries of one mapping, checked against the keys it may hold.
struct Fields<'a> {
    entries: &'a [(Key, Node)],
    span: SourceSpan,
    path: String,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a Node> {
        self.entries
            .iter()
            .find(|(k, _)| k.name == key)
            .map(|(_, n)| n)
    }
    fn key_span(&self, key: &str) -> Option<SourceSpan> {
        self.entries
            .iter()
            .find(|(k, _)| k.name == key)
            .map(|(k, _)| k.span)
    }
    fn at(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }
}

impl Loader<'_> {
    fn problem(&mut self, p: Problem) {
        self.problems.push(p);
    }

    fn type_error(&mut self, node: &Node, path: &str, expected: &str) {
        self.problem(
            Problem::new(
                "srt::recipe::type",
                node.span,
                format!("`{path}` must be {expected}, found {}", node.value.kind()),
            )
            .label(format!("expected {expected}")),
        );
    }

    /// Check a mapping's keys: unknown keys get a "did you mean", srtctl-only keys say so.
    fn fields<'a>(
        &mut self,
        node: &'a Node,
        path: &str,
        allowed: &[&str],
        srtctl_only: &[&str],
    ) -> Option<Fields<'a>> {
        let Value::Map(entries) = &node.value else {
            self.type_error(
                node,
                if path.is_empty() { "recipe" } else { path },
                "a mapping",
            );
            return None;
        };
        for (key, value) in entries {
            if allowed.contains(&key.name.as_str()) {
                continue;
            }
            let as_srt = SRTCTL_AS_SRT
                .iter()
                .any(|(k, v)| *k == key.name && value.value == Value::Bool(*v));
            if as_srt && srtctl_only.contains(&key.name.as_str()) {
                continue;
            }
            let full = if path.is_empty() {
                key.name.clone()
            } else {
                format!("{path}.{}", key.name)
            };
            if srtctl_only.contains(&key.name.as_str()) {
                self.problem(
                    Problem::new(
                        "srt::recipe::unsupported_key",
                        key.span,
                        format!("`{full}` is an srtctl key that srt does not support"),
                    )
                    .label("not supported")
                    .help(
                        "remove it; srt refuses keys it would otherwise ignore \
                         (see docs/recipe-reference.md for what srt reads)",
                    ),
                );
                continue;
            }
            let mut problem = Problem::new(
                "srt::recipe::unknown_key",
                key.span,
                format!("unknown key `{full}`"),
            )
            .label("unknown key");
            problem = match did_you_mean(&key.name, allowed.iter().copied()) {
                Some(s) => problem.help(format!("did you mean `{s}`?")),
                None => problem.help(format!("expected one of: {}", allowed.join(", "))),
            };
            self.problem(problem);
        }
        Some(Fields {
            entries,
            span: node.span,
            path: path.to_string(),
        })
    }

    fn string(&mut self, node: &Node, path: &str) -> Option<String> {
        match &node.value {
            Value::Str(s) => Some(s.clone()),
            _ => {
                self.type_error(node, path, "a string");
                None
            }
        }
    }

    fn opt_string(&mut self, f: &Fields, key: &str) -> Option<String> {
        let node = f.get(key)?;
        if node.value == Value::Null {
            return None;
        }
        self.string(node, &f.at(key))
    }

    fn uint(&mut self, node: &Node, path: &str, min: i64, max: i64) -> Option<i64> {
        match &node.value {
            Value::Int(v) if (min..=max).contains(v) => Some(*v),
            Value::Int(v) => {
                self.problem(
                    Problem::new(
                        "srt::recipe::range",
                        node.span,
                        format!("`{path}` must be between {min} and {max}, found {v}"),
                    )
                    .label("out of range"),
                );
                None
            }
            _ => {
                self.type_error(node, path, "an integer");
                None
            }
        }
    }

    /// A number from 0 to 1, both included.
    /// A number (an integer or a float), else the type problem naming `expected`.
    fn number(&mut self, node: &Node, path: &str, expected: &str) -> Option<f64> {
        match &node.value {
            Value::Int(v) => Some(*v as f64),
            Value::Float(v) => Some(*v),
            _ => {
                self.type_error(node, path, expected);
                None
            }
        }
    }

    fn fraction(&mut self, node: &Node, path: &str) -> Option<f64> {
        let v = self.number(node, path, "a number")?;
        if (0.0..=1.0).contains(&v) {
            return Some(v);
        }
        self.problem(
            Problem::new(
                "srt::recipe::range",
                node.span,
                format!("`{path}` must be a number from 0 to 1, found {v}"),
            )
            .label("out of range"),
        );
        None
    }

    fn u32_field(&mut self, f: &Fields, key: &str, min: i64, max: i64) -> Option<Sp<u32>> {
        let node = f.get(key)?;
        let v = self.uint(node, &f.at(key), min, max.min(u32::MAX as i64))?;
        Some(Sp::new(v as u32, node.span))
    }

    fn bool_field(&mut self, f: &Fields, key: &str, default: bool) -> Sp<bool> {
        match f.get(key) {
            None => Sp::new(default, f.span),
            Some(node) => match &node.value {
                Value::Bool(b) => Sp::new(*b, node.span),
                Value::Str(s) if yaml11_boolean(s).is_some() => {
                    let written = yaml11_boolean(s).unwrap_or_default();
                    self.problem(
                        Problem::new(
                            "srt::recipe::type",
                            node.span,
                            format!(
                                "`{}` must be true or false, found the string `{s}`",
                                f.at(key)
                            ),
                        )
                        .label("a string in YAML 1.2")
                        .help(format!(
                            "YAML 1.2 reads only true/false as booleans; write `{written}`"
                        )),
                    );
                    Sp::new(default, node.span)
                }
                _ => {
                    self.type_error(node, &f.at(key), "true or false");
                    Sp::new(default, node.span)
                }
            },
        }
    }

    fn env(&mut self, f: &Fields, key: &str) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        let Some(node) = f.get(key) else { return env };
        let path = f.at(key);
        let Value::Map(entries) = &node.value else {
            if node.value != Value::Null {
                self.type_error(node, &path, "a mapping of variable names to values");
            }
            return env;
        };
        for (k, v) in entries {
            if !valid_env_name(&k.name) {
                self.problem(
                    Problem::new(
                        "srt::recipe::env_name",
                        k.span,
                        format!(
                            "`{path}.{}` is not a valid environment variable name",
                            k.name
                        ),
                    )
                    .label("invalid name")
                    .help("names are letters, digits and `_`, not starting with a digit"),
                );
                continue;
            }
            let value = match &v.value {
                Value::Str(s) => s.clone(),
                Value::Int(i) => i.to_string(),
                Value::Float(x) => x.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => {
                    self.type_error(v, &format!("{path}.{}", k.name), "a scalar");
                    continue;
                }
            };
            env.insert(k.name.clone(), value);
        }
        env
    }

    /// Where each key of the `key` environment mapping is written.
    fn env_spans(&self, f: &Fields, key: &str) -> BTreeMap<String, SourceSpan> {
        match f.get(key).map(|n| &n.value) {
            Some(Value::Map(entries)) => entries
                .iter()
                .map(|(k, _)| (k.name.clone(), k.span))
                .collect(),
            _ => BTreeMap::new(),
        }
    }

    fn args(&mut self, node: Option<&Node>, path: &str) -> Args {
        let Some(node) = node else {
            return Args::default();
        };
        let entries = match &node.value {
            Value::Map(entries) => entries,
            Value::Null => return Args::default(),
            _ => {
                self.type_error(node, path, "a mapping of flags to values");
                return Args::default();
            }
        };
        let mut args: Vec<Arg> = Vec::new();
        for (k, v) in entries {
            let key = k.name.trim_start_matches('-').replace('_', "-");
            if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                self.problem(
                    Problem::new(
                        "srt::recipe::flag_name",
                        k.span,
                        format!("`{}` is not a valid flag name in `{path}`", k.name),
                    )
                    .label("invalid flag name")
                    .help("flags are letters, digits, `-` and `_`, written without leading dashes"),
                );
                continue;
            }
            if let Some(prev) = args.iter().find(|a| a.key == key) {
                let _ = prev;
                self.problem(
                    Problem::new(
                        "srt::recipe::duplicate_flag",
                        k.span,
                        format!("flag `{key}` is given twice in `{path}` (kebab and snake case are the same flag)"),
                    )
                    .label("second occurrence"),
                );
                continue;
            }
            let Some(value) = self.arg_value(v, &format!("{path}.{}", k.name)) else {
                continue;
            };
            args.push(Arg {
                key,
                key_span: k.span,
                value,
                value_span: v.span,
            });
        }
        Args(args)
    }

    fn arg_value(&mut self, node: &Node, path: &str) -> Option<ArgValue> {
        Some(match &node.value {
            Value::Null => ArgValue::Null,
            Value::Bool(b) => ArgValue::Bool(*b),
            Value::Int(i) => ArgValue::Int(*i),
            Value::Float(f) => ArgValue::Float(*f),
            Value::Str(s) => {
                if !self.not_option_like(s, node.span, path) {
                    return None;
                }
                ArgValue::Str(s.clone())
            }
            Value::Seq(items) => {
                let mut out = Vec::new();
                for item in items {
                    match &item.value {
                        Value::Seq(_) | Value::Map(_) => {
                            self.type_error(item, path, "a scalar list item");
                            return None;
                        }
                        _ => out.push(self.arg_value(item, path)?),
                    }
                }
                ArgValue::List(out)
            }
            Value::Map(_) => ArgValue::Json(to_json(node)),
        })
    }

    /// A value that reaches a command line must not read as an option: Python's argparse
    /// (vLLM's and the Routers' parsers) takes a token starting with `-` as a flag unless
    /// it is a negative number, so `model.path: --trust-remote-code` would render as
    /// `vllm serve --trust-remote-code` and `served_name: --port=1` as a port. Refused,
    /// with the span; returns whether the value is acceptable.
    fn not_option_like(&mut self, value: &str, span: SourceSpan, path: &str) -> bool {
        if !super::looks_like_option(value) {
            return true;
        }
        self.problem(
            Problem::new(
                "srt::recipe::option_like_value",
                span,
                format!("`{path}` is `{}`, which a command line would read as an option", crate::term::escape_line(value)),
            )
            .label("starts with `-`")
            .help("argparse (vLLM, the Router) treats a value starting with `-` as a flag; use a value that does not start with `-`"),
        );
        false
    }

    /// srtctl's `infra:`: `etcd_nats_dedicated_node` puts the frontend's services on a
    /// node of their own (its span when true); NATS's payload limit is refused.
    /// `infra:`: where `etcd_nats_dedicated_node: true` is written, and
    /// `nats_max_payload_mb`.
    fn infra(&mut self, node: Option<&Node>) -> (Option<SourceSpan>, Option<Sp<u32>>) {
        let Some(node) = node.filter(|n| n.value != Value::Null) else {
            return (None, None);
        };
        let Some(f) = self.fields(node, "infra", &keys::names(keys::INFRA), &[]) else {
            return (None, None);
        };
        let payload = f.get("nats_max_payload_mb").and_then(|n| {
            let mb = self.uint(n, "infra.nats_max_payload_mb", 1, 64)?;
            Some(Sp::new(mb as u32, n.span))
        });
        let dedicated = f
            .get("etcd_nats_dedicated_node")
            .and_then(|n| match n.value {
                Value::Bool(true) => f.key_span("etcd_nats_dedicated_node"),
                Value::Bool(false) => None,
                _ => {
                    self.type_error(n, "infra.etcd_nats_dedicated_node", "true or false");
                    None
                }
            });
        (dedicated, payload)
    }

    fn recipe(&mut self, root: &Node, default_name: &str) -> Option<Recipe> {
        let mut top = keys::names(keys::TOP);
        top.extend(keys::OWNED_SECTIONS);
        let f = self.fields(root, "", &top, SRTCTL_ONLY_TOP)?;
        if let Some(node) = f.get("schema") {
            if node.value != Value::Int(2) {
                self.problem(
                    Problem::new(
                        "srt::recipe::schema_version",
                        node.span,
                        "srt reads srtctl 2.0 recipes: `schema` must be 2",
                    )
                    .label("unsupported schema")
                    .help("srt reads srtctl v1 recipes (no `schema`, or `schema: 1`) and 2.0 ones (`schema: 2`)"),
                );
            }
        }
        let name = match f.get("name") {
            Some(node) => {
                let name = self.string(node, "name").unwrap_or_default();
                if !valid_name(&name) {
                    self.problem(
                        Problem::new(
                            "srt::recipe::name",
                            node.span,
                            format!("`{name}` is not a valid deployment name"),
                        )
                        .label("invalid name")
                        .help("use letters, digits, `-`, `_` and `.`, starting with a letter or digit (at most 128 characters)"),
                    );
                }
                Sp::new(name, node.span)
            }
            None => {
                if !valid_name(default_name) {
                    let suggestion = sanitize_name(default_name);
                    self.problem(
                        Problem::new(
                            "srt::recipe::name",
                            SourceSpan::new(0.into(), 0),
                            format!(
                                "the recipe has no `name`, and its file name `{}` is not a valid deployment name",
                                crate::term::escape_line(default_name)
                            ),
                        )
                        .label("no `name:` in this document")
                        .help(match suggestion {
                            Some(s) => format!("add `name: {s}` (names use letters, digits, `-`, `_` and `.`, starting with a letter or digit)"),
                            None => "add `name: <deployment>` (names use letters, digits, `-`, `_` and `.`, starting with a letter or digit)".to_string(),
                        }),
                    );
                }
                Sp::new(default_name.to_string(), SourceSpan::new(0.into(), 0))
            }
        };
        let model = self.model(f.get("model"), root.span);
        let resources = self.resources(f.get("resources"), root.span);
        let engine = self.engine(f.get("engine"), root.span);
        let roles = match f.get("roles") {
            Some(node) => self.roles(node, f.key_span("roles").unwrap_or(node.span)),
            None => {
                self.problem(
                    Problem::new(
                        "srt::recipe::missing_key",
                        SourceSpan::new(0.into(), 0),
                        "the recipe has no `roles`",
                    )
                    .label("roles expected in this document")
                    .help("add `roles:` with `agg:`, or `prefill:` and `decode:`"),
                );
                Vec::new()
            }
        };
        let frontend = self.frontend(f.get("frontend"), f.key_span("frontend"));
        let health_check = self.health_check(f.get("health_check"));
        let rollout = self.rollout(f.get("rollout"));
        let slurm = self.slurm(f.get("slurm"));
        let (services_node, nats_max_payload_mb) = self.infra(f.get("infra"));
        let runtime = self.runtime(&f);
        let benchmark = self.benchmark(f.get("benchmark"), f.key_span("benchmark"), &runtime);
        let sensitive_env = self.sensitive_env(f.get("sensitive_env"));
        let sections = keys::OWNED_SECTIONS
            .iter()
            .filter_map(|name| {
                let node = f.get(name)?;
                let key_span = f.key_span(name).unwrap_or(node.span);
                Some((name.to_string(), self.section(node, key_span, name)?))
            })
            .collect();
        let mut model = model?;
        let explicit_name = f.get("model").is_some_and(|m| match &m.value {
            Value::Map(entries) => entries.iter().any(|(k, _)| k.name == "served_name"),
            _ => false,
        });
        self.served_name_from_args(&mut model, explicit_name, &roles);
        Some(Recipe {
            name,
            model,
            resources: resources?,
            engine: engine?,
            roles,
            frontend: frontend?,
            health_check: health_check?,
            rollout: rollout?,
            sensitive_env,
            sections,
            slurm,
            benchmark,
            services_node,
            nats_max_payload_mb,
            notes: Vec::new(),
            sweep: None,
            runtime,
        })
    }

    /// A section a component owns, as written (`null` is an empty one).
    fn section(&mut self, node: &Node, key_span: SourceSpan, name: &str) -> Option<Section> {
        let entries = match &node.value {
            Value::Map(entries) => entries,
            Value::Null => {
                return Some(Section {
                    key_span,
                    entries: Vec::new(),
                })
            }
            _ => {
                self.type_error(node, name, "a mapping");
                return None;
            }
        };
        let mut out = Vec::new();
        for (k, v) in entries {
            let Some(value) = self.arg_value(v, &format!("{name}.{}", k.name)) else {
                continue;
            };
            out.push(Arg {
                key: k.name.clone(),
                key_span: k.span,
                value,
                value_span: v.span,
            });
        }
        Some(Section {
            key_span,
            entries: out,
        })
    }

    fn slurm(&mut self, node: Option<&Node>) -> SlurmSettings {
        let mut out = SlurmSettings::default();
        let Some(node) = node else { return out };
        let Some(f) = self.fields(node, "slurm", &keys::names(keys::SLURM), &[]) else {
            return out;
        };
        out.time_limit = self.opt_string(&f, "time_limit");
        if let (Some(t), Some(n)) = (&out.time_limit, f.get("time_limit")) {
            let ok = {
                let (days, rest) = t.split_once('-').unwrap_or(("0", t));
                days.chars().all(|c| c.is_ascii_digit())
                    && !rest.is_empty()
                    && rest.split(':').count() <= 3
                    && rest
                        .split(':')
                        .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
            };
            if !ok {
                self.problem(
                    Problem::new(
                        "srt::recipe::time_limit",
                        n.span,
                        format!("`slurm.time_limit` `{t}` is not a SLURM time"),
                    )
                    .label("not a time")
                    .help("use MM, HH:MM:SS or D-HH:MM:SS"),
                );
            }
        }
        out.partition = self.opt_string(&f, "partition");
        out.account = self.opt_string(&f, "account");
        out
    }

    fn benchmark(
        &mut self,
        node: Option<&Node>,
        key_span: Option<SourceSpan>,
        runtime: &crate::recipe::runtime::RuntimeKeys,
    ) -> Option<BenchmarkRun> {
        let node = node?;
        if node.value == Value::Null {
            return None;
        }
        // srtctl's sa-bench keys srt has no equivalent for (placement of the client,
        // per-request HTTP sessions, transformers' modes).
        const SRTCTL_ONLY: &[&str] = &[
            "reuse_http_connections",
            "client_placement",
            "client_dedicated_node",
            "colocate_with_frontend",
            "tokenizer_mode",
        ];
        let span = key_span.unwrap_or(node.span);
        // The type first: the keys of a benchmark srt does not run are not checked.
        let kind = match srtctl::tree::get(node, "type") {
            Some(t) => {
                let kind = self.string(t, "benchmark.type")?;
                if kind == "custom" {
                    return self
                        .command_benchmark(node, span)
                        .map(BenchmarkRun::Command);
                }
                if keys::EVALS.contains(&kind.as_str()) {
                    return self
                        .eval_benchmark(node, span, t.span, kind)
                        .map(BenchmarkRun::Eval);
                }
                if kind == "mooncake-router" || kind == "trace-replay" {
                    return self
                        .trace_benchmark(node, span, &kind)
                        .map(BenchmarkRun::Trace);
                }
                if kind != "sa-bench" {
                    self.problem(
                        Problem::new("srt::recipe::benchmark_type", t.span, format!("benchmark type `{kind}` is not supported by srt"))
                            .label("unsupported benchmark")
                            .help("srt runs `sa-bench` (its built-in equivalent), `custom` (a command), `gsm8k` and `gpqa` (SGLang's `run_eval`), `mooncake-router` and `trace-replay` (aiperf); remove `benchmark` to skip it"),
                    );
                    return None;
                }
                kind
            }
            None if matches!(node.value, Value::Map(_)) => {
                self.problem(
                    Problem::new(
                        "srt::recipe::missing_key",
                        span,
                        "`benchmark.type` is missing",
                    )
                    .label("this benchmark")
                    .help("add `type: sa-bench`"),
                );
                return None;
            }
            None => String::new(),
        };
        let serving: Vec<&str> = keys::names(keys::BENCHMARK)
            .into_iter()
            .filter(|k| {
                *k == "type"
                    || !(keys::COMMAND_BENCHMARK.contains(k)
                        || keys::EVAL_COUNTS.contains(k)
                        || keys::EVAL_SAMPLING.contains(k)
                        || keys::TRACE_BENCHMARK.contains(k)
                        || keys::REPLAY_ONLY.contains(k))
            })
            .collect();
        let f = self.fields(node, "benchmark", &serving, SRTCTL_ONLY)?;
        let table = keys::BENCHMARK;
        let num = |this: &mut Self, key: &str, min: i64| -> Option<Option<u32>> {
            match f.get(key) {
                Some(n) => Some(Some(
                    this.uint(n, &format!("benchmark.{key}"), min, 1_000_000)? as u32,
                )),
                None => Some(None),
            }
        };
        let isl = num(self, "isl", 1)?.unwrap_or_else(|| keys::default(table, "isl"));
        let osl_given = num(self, "osl", 1)?;
        let osl = osl_given.unwrap_or_else(|| keys::default(table, "osl"));
        let num_prompts_mult = match (f.get("num_prompts_mult"), f.get("requests_per_concurrency")) {
            (Some(n), Some(_)) => {
                self.problem(
                    Problem::new(
                        "srt::recipe::conflict",
                        n.span,
                        "`benchmark.num_prompts_mult` and `benchmark.requests_per_concurrency` both set the requests per level",
                    )
                    .label("set one of them")
                    .help("`requests_per_concurrency` is srt's earlier name for srtctl's `num_prompts_mult`"),
                );
                return None;
            }
            (Some(_), None) => num(self, "num_prompts_mult", 1)?,
            (None, Some(_)) => num(self, "requests_per_concurrency", 1)?,
            (None, None) => None,
        }
        .unwrap_or_else(|| keys::default(table, "num_prompts_mult"));
        let num_warmup_mult = num(self, "num_warmup_mult", 0)?
            .unwrap_or_else(|| keys::default(table, "num_warmup_mult"));
        let random_prefix_len = num(self, "random_prefix_len", 0)?
            .unwrap_or_else(|| keys::default(table, "random_prefix_len"));
        let concurrencies = match f.get("concurrencies") {
            None => vec![keys::default::<u32>(table, "concurrencies")],
            Some(c) => {
                let parsed: Option<Vec<u32>> = match &c.value {
                    Value::Int(_) => level(&c.value).map(|l| vec![l]),
                    Value::Str(s) => s.split('x').map(level_text).collect(),
                    Value::Seq(items) => items.iter().map(|i| level(&i.value)).collect(),
                    _ => None,
                };
                match parsed.filter(|v| !v.is_empty()) {
                    Some(v) => v,
                    None => {
                        self.problem(
                            Problem::new("srt::recipe::concurrencies", c.span, "`benchmark.concurrencies` must be levels like \"4x8\", 8 or [4, 8]")
                                .label("not a list of concurrency levels"),
                        );
                        return None;
                    }
                }
            }
        };
        let req_rate = match f.get("req_rate") {
            None => None,
            Some(n) => match &n.value {
                Value::Str(s) if s == "inf" => None,
                // srtctl's `req_rate: str | int`, passed on as written: a quoted number
                // is that number.
                Value::Str(s) if rate_number(s).is_some() => rate_number(s),
                Value::Int(v) if *v > 0 => Some(*v as f64),
                Value::Float(v) if v.is_finite() && *v > 0.0 => Some(*v),
                Value::Float(v) if v.is_infinite() && *v > 0.0 => None,
                _ => {
                    self.problem(
                        Problem::new(
                            "srt::recipe::value",
                            n.span,
                            "`benchmark.req_rate` must be `inf` or a number of requests per second above 0",
                        )
                        .label("not a request rate"),
                    );
                    return None;
                }
            },
        };
        let random_range_ratio = match f.get("random_range_ratio") {
            None => keys::default(table, "random_range_ratio"),
            Some(n) => match &n.value {
                Value::Float(v) if (0.0..=1.0).contains(v) => *v,
                Value::Int(i @ (0 | 1)) => *i as f64,
                _ => {
                    self.problem(
                        Problem::new(
                            "srt::recipe::range",
                            n.span,
                            "`benchmark.random_range_ratio` must be a number from 0 to 1",
                        )
                        .label("out of range"),
                    );
                    return None;
                }
            },
        };
        let dataset_path = self.opt_string(&f, "dataset_path");
        let dataset_name = self
            .opt_string(&f, "dataset_name")
            .unwrap_or_else(|| keys::default(table, "dataset_name"));
        match dataset_name.as_str() {
            "random" => {
                if let (Some(_), Some(p)) = (&dataset_path, f.key_span("dataset_path")) {
                    self.problem(
                        Problem::new(
                            "srt::recipe::conflict",
                            p,
                            "`benchmark.dataset_path` is only read with `dataset_name: sharegpt`",
                        )
                        .label("not read by the random dataset")
                        .help("remove it, or set `dataset_name: sharegpt`"),
                    );
                    return None;
                }
            }
            "sharegpt" => {
                if dataset_path.is_none() {
                    self.problem(
                        Problem::new(
                            "srt::recipe::missing_key",
                            f.key_span("dataset_name").unwrap_or(span),
                            "`dataset_name: sharegpt` needs `benchmark.dataset_path`",
                        )
                        .label("no dataset file")
                        .help("set `dataset_path` to a ShareGPT-style JSON file"),
                    );
                    return None;
                }
            }
            other => {
                let at = f.get("dataset_name").map(|n| n.span).unwrap_or(span);
                self.problem(
                    Problem::new(
                        "srt::recipe::value",
                        at,
                        format!("unknown `benchmark.dataset_name` `{other}`"),
                    )
                    .label("unknown dataset")
                    .help("expected `random` or `sharegpt` (srtctl's `custom` JSONL format is not read)"),
                );
                return None;
            }
        }
        let endpoint = self
            .opt_string(&f, "endpoint")
            .unwrap_or_else(|| keys::default(table, "endpoint"));
        if !["/v1/completions", "/v1/chat/completions"].contains(&endpoint.as_str()) {
            let at = f.get("endpoint").map(|n| n.span).unwrap_or(span);
            self.problem(
                Problem::new(
                    "srt::recipe::value",
                    at,
                    format!("unknown `benchmark.endpoint` `{endpoint}`"),
                )
                .label("unknown endpoint")
                .help("expected `/v1/completions` or `/v1/chat/completions`"),
            );
            return None;
        }
        let ignore_eos = self
            .bool_field(&f, "ignore_eos", keys::default(table, "ignore_eos"))
            .value;
        let use_chat_template = self
            .bool_field(
                &f,
                "use_chat_template",
                keys::default(table, "use_chat_template"),
            )
            .value;
        let custom_tokenizer = match f.get("custom_tokenizer") {
            Some(n) => Some(self.tokenizer_adapter(n, runtime)?),
            None => None,
        };
        let seed = match f.get("seed") {
            Some(n) => self.uint(n, "benchmark.seed", 0, i64::MAX)? as u64,
            None => keys::default(table, "seed"),
        };
        let percentiles = match f.get("metric_percentiles") {
            None => keys::default(table, "metric_percentiles"),
            Some(n) => {
                let one = |v: &Value| match v {
                    Value::Int(i) if *i > 0 && *i <= 100 => Some(*i as f64),
                    Value::Float(x) if *x > 0.0 && *x <= 100.0 => Some(*x),
                    _ => None,
                };
                let parsed: Option<Vec<f64>> = match &n.value {
                    Value::Seq(items) if !items.is_empty() => {
                        items.iter().map(|i| one(&i.value)).collect()
                    }
                    v => one(v).map(|p| vec![p]),
                };
                match parsed {
                    Some(p) => p,
                    None => {
                        self.problem(
                            Problem::new(
                                "srt::recipe::value",
                                n.span,
                                "`benchmark.metric_percentiles` must be percentiles above 0 and at most 100, like [50, 90, 99]",
                            )
                            .label("not a list of percentiles"),
                        );
                        return None;
                    }
                }
            }
        };
        let mut goodput = [None; 3];
        if let Some(g) = f.get("goodput") {
            let gf = self.fields(g, "benchmark.goodput", &["ttft", "tpot", "e2el"], &[])?;
            for (i, key) in ["ttft", "tpot", "e2el"].iter().enumerate() {
                if let Some(n) = gf.get(key) {
                    goodput[i] = match &n.value {
                        Value::Int(v) if *v >= 0 => Some(*v as f64),
                        Value::Float(v) if v.is_finite() && *v >= 0.0 => Some(*v),
                        _ => {
                            self.type_error(
                                n,
                                &format!("benchmark.goodput.{key}"),
                                "a number of milliseconds",
                            );
                            return None;
                        }
                    };
                }
            }
        }
        let tokenizer = self.opt_string(&f, "tokenizer");
        let levels: u64 = concurrencies.iter().map(|&c| u64::from(c)).sum();
        let requests = levels * (u64::from(num_prompts_mult) + u64::from(num_warmup_mult));
        if requests > crate::recipe::limits::MAX_BENCHMARK_REQUESTS {
            self.problem(
                Problem::new(
                    "srt::recipe::limit",
                    span,
                    format!(
                        "the benchmark sends {requests} requests; srt sends at most {} per apply",
                        crate::recipe::limits::MAX_BENCHMARK_REQUESTS
                    ),
                )
                .label("this benchmark")
                .help("lower `concurrencies`, `num_prompts_mult` or `num_warmup_mult`"),
            );
            return None;
        }
        let max_duration_secs = match f.get("max_duration_seconds") {
            Some(n) => self.uint(
                n,
                "benchmark.max_duration_seconds",
                1,
                crate::recipe::limits::MAX_BENCHMARK_SECONDS as i64,
            )? as u64,
            None => keys::default(table, "max_duration_seconds"),
        };
        let max_failed_fraction = self.max_failed_fraction(&f)?;
        let slow_down = self.slow_down(&f, span)?;
        let req_rate_span = f.get("req_rate").map_or(span, |n| n.span);
        let tokenizer_span = f.get("tokenizer").map_or(span, |n| n.span);
        Some(BenchmarkRun::Serving(Box::new(Benchmark {
            span,
            kind,
            isl,
            osl,
            osl_written: osl_given.is_some(),
            concurrencies,
            num_prompts_mult,
            num_warmup_mult,
            req_rate,
            req_rate_span,
            max_duration_secs,
            max_failed_fraction,
            random_range_ratio,
            random_prefix_len,
            dataset_path: if dataset_name == "sharegpt" {
                dataset_path
            } else {
                None
            },
            tokenizer,
            tokenizer_span,
            endpoint,
            ignore_eos,
            use_chat_template,
            custom_tokenizer,
            seed,
            percentiles,
            goodput,
            slow_down,
        })))
    }

    /// A `custom` benchmark: its `command` (required), `env` and `container_image`.
    fn command_benchmark(&mut self, node: &Node, span: SourceSpan) -> Option<CommandBenchmark> {
        let f = self.fields(node, "benchmark", keys::COMMAND_BENCHMARK, &[])?;
        let env = self.env(&f, "env");
        let container_image = self.opt_string(&f, "container_image");
        let command = match f.get("command") {
            Some(n) => self.string(n, "benchmark.command")?,
            None => String::new(),
        };
        if command.trim().is_empty() {
            self.problem(
                Problem::new(
                    "srt::recipe::missing_key",
                    f.key_span("command").unwrap_or(span),
                    "a `custom` benchmark needs `benchmark.command`",
                )
                .label("no command")
                .help("write the command to run once the deployment serves, e.g. `command: ./bench.sh \"$SRT_FRONTEND_HOST:$SRT_FRONTEND_PORT\"`"),
            );
            return None;
        }
        Some(CommandBenchmark {
            span,
            command,
            env,
            container_image,
            login_shell: true,
        })
    }

    /// `benchmark.slow_down_sleep_time` with `slow_down_wait_time`: both or neither
    /// (srtctl turns the slow-down on only with both), each a number of seconds above 0.
    fn slow_down(
        &mut self,
        f: &Fields,
        span: SourceSpan,
    ) -> Option<Option<crate::recipe::SlowDown>> {
        const SLEEP: &str = "slow_down_sleep_time";
        const WAIT: &str = "slow_down_wait_time";
        let (sleep, wait) = match (f.get(SLEEP), f.get(WAIT)) {
            (None, None) => return Some(None),
            (Some(s), Some(w)) => (s, w),
            (one, _) => {
                let (given, missing) = if one.is_some() {
                    (SLEEP, WAIT)
                } else {
                    (WAIT, SLEEP)
                };
                self.problem(
                    Problem::new(
                        "srt::recipe::missing_key",
                        f.key_span(given).unwrap_or(span),
                        format!("`benchmark.{given}` needs `benchmark.{missing}`"),
                    )
                    .label("half of the slow-down")
                    .help(format!("set `{missing}` too (srtctl turns the slow-down on only with both), or remove `{given}`")),
                );
                return None;
            }
        };
        let mut seconds = |node: &Node, key: &str, max: f64| {
            let path = format!("benchmark.{key}");
            let v = self.number(node, &path, "a number of seconds")?;
            if v > 0.0 && v <= max {
                return Some(v);
            }
            self.problem(
                Problem::new(
                    "srt::recipe::range",
                    node.span,
                    format!("`{path}` must be above 0 and at most {max} seconds, found {v}"),
                )
                .label("out of range")
                .help("remove both `slow_down_*` keys to run without a slow-down"),
            );
            None
        };
        let sleep_seconds = seconds(sleep, SLEEP, 3600.0);
        let wait_seconds = seconds(
            wait,
            WAIT,
            crate::recipe::limits::MAX_BENCHMARK_SECONDS as f64,
        );
        Some(Some(crate::recipe::SlowDown {
            sleep_seconds: sleep_seconds?,
            wait_seconds: wait_seconds?,
            span: f.key_span(SLEEP).unwrap_or(span),
        }))
    }

    /// `benchmark.max_failed_fraction` (a fraction of the requests), else its default.
    fn max_failed_fraction(&mut self, f: &Fields) -> Option<f64> {
        match f.get("max_failed_fraction") {
            Some(n) => self.fraction(n, "benchmark.max_failed_fraction"),
            None => Some(keys::default(keys::BENCHMARK, "max_failed_fraction")),
        }
    }

    /// A `gsm8k` or `gpqa` benchmark: its counts and sampling values, each checked
    /// as srtctl checks them (counts above 0, `num_shots` at least 0).
    fn eval_benchmark(
        &mut self,
        node: &Node,
        span: SourceSpan,
        type_span: SourceSpan,
        eval: String,
    ) -> Option<EvalBenchmark> {
        let allowed: Vec<&str> = ["type", "container_image"]
            .into_iter()
            .chain(keys::EVAL_COUNTS.iter().copied())
            .chain(keys::EVAL_SAMPLING.iter().copied())
            .collect();
        let f = self.fields(node, "benchmark", &allowed, &[])?;
        let mut counts = BTreeMap::new();
        for key in keys::EVAL_COUNTS {
            let Some(n) = f.get(key) else { continue };
            let (min, max) = match *key {
                "num_shots" => (0, 1_000),
                "top_k" => (-1, 1_000_000),
                _ => (1, 100_000_000),
            };
            let value = self.uint(n, &format!("benchmark.{key}"), min, max)?;
            counts.insert(key.to_string(), Sp::new(value, n.span));
        }
        let mut sampling = BTreeMap::new();
        for key in keys::EVAL_SAMPLING {
            let Some(n) = f.get(key) else { continue };
            let value = match &n.value {
                Value::Int(i) if *i >= 0 => *i as f64,
                Value::Float(x) if x.is_finite() && *x >= 0.0 => *x,
                _ => {
                    self.type_error(n, &format!("benchmark.{key}"), "a number at least 0");
                    return None;
                }
            };
            sampling.insert(key.to_string(), Sp::new(value, n.span));
        }
        let container_image = self.opt_string(&f, "container_image");
        Some(EvalBenchmark {
            span,
            type_span,
            eval,
            counts,
            sampling,
            container_image,
        })
    }

    /// A `mooncake-router` benchmark: the trace, goodput's thresholds (above 0, as
    /// srtctl checks them) and the failure bound, srtctl's defaults for those unset.
    /// An aiperf trace replay: `mooncake-router` (one of the Mooncake traces) or
    /// `trace-replay` (the recipe's own trace, at each concurrency).
    fn trace_benchmark(
        &mut self,
        node: &Node,
        span: SourceSpan,
        kind: &str,
    ) -> Option<TraceBenchmark> {
        let own = match kind {
            "trace-replay" => keys::REPLAY_BENCHMARK,
            _ => keys::TRACE_BENCHMARK,
        };
        let allowed: Vec<&str> = ["type", "container_image", "max_failed_fraction"]
            .into_iter()
            .chain(own.iter().copied())
            .collect();
        let f = self.fields(node, "benchmark", &allowed, &[])?;
        let table = keys::BENCHMARK;
        let source = match kind {
            "trace-replay" => self.replayed_file(&f, span)?,
            _ => TraceSource::Mooncake {
                workload: self.mooncake_workload(&f)?,
            },
        };
        let threshold = |this: &mut Self, key: &str| -> Option<u64> {
            match f.get(key) {
                Some(n) => Some(this.uint(n, &format!("benchmark.{key}"), 1, 3_600_000)? as u64),
                None => Some(keys::default(table, key)),
            }
        };
        let ttft_threshold_ms = threshold(self, "ttft_threshold_ms")?;
        let itl_threshold_ms = threshold(self, "itl_threshold_ms")?;
        let max_failed_fraction = self.max_failed_fraction(&f)?;
        let container_image = self.opt_string(&f, "container_image");
        if let Some(n) = f.get("aiperf_package") {
            let requirement = self.string(n, "benchmark.aiperf_package")?;
            if let Err(why) = crate::bench::aiperf_requirement(&requirement) {
                self.problem(
                    Problem::new(
                        "srt::recipe::value",
                        n.span,
                        format!("`benchmark.aiperf_package`: {why}"),
                    )
                    .label("not the aiperf srt runs")
                    .help("remove it, or write a requirement the pinned release meets (`aiperf>=0.7.0`)"),
                );
                return None;
            }
        }
        Some(TraceBenchmark {
            span,
            source,
            ttft_threshold_ms,
            itl_threshold_ms,
            max_failed_fraction,
            container_image,
        })
    }

    /// `mooncake_workload`: one of the Mooncake traces, else the default.
    fn mooncake_workload(&mut self, f: &Fields) -> Option<String> {
        let Some(n) = f.get("mooncake_workload") else {
            return Some(keys::default(keys::BENCHMARK, "mooncake_workload"));
        };
        let w = self.string(n, "benchmark.mooncake_workload")?;
        if keys::MOONCAKE_WORKLOADS.contains(&w.as_str()) {
            return Some(w);
        }
        let problem = Problem::new(
            "srt::recipe::value",
            n.span,
            format!("`benchmark.mooncake_workload` has no trace `{w}`"),
        )
        .label("unknown trace");
        self.problem(
            match did_you_mean(&w, keys::MOONCAKE_WORKLOADS.iter().copied()) {
                Some(close) => problem.help(format!("did you mean `{close}`?")),
                None => problem.help(format!(
                    "expected one of: {}",
                    keys::MOONCAKE_WORKLOADS.join(", ")
                )),
            },
        );
        None
    }

    /// `trace-replay`'s `trace_file` (an absolute path) and `concurrencies` (a list, a
    /// number, or text its script splits at commas), both required as srtctl requires.
    fn replayed_file(&mut self, f: &Fields, span: SourceSpan) -> Option<TraceSource> {
        let required = |this: &mut Self, key: &str, what: &str| {
            this.problem(
                Problem::new(
                    "srt::recipe::missing_key",
                    span,
                    format!("`benchmark.{key}` is required by `trace-replay`"),
                )
                .label("this benchmark")
                .help(what.to_string()),
            );
        };
        let Some(file) = f.get("trace_file") else {
            required(self, "trace_file", "set it to the trace's path on the benchmark's node (in its container where there is one)");
            return None;
        };
        let path = self.string(file, "benchmark.trace_file")?;
        if !path.starts_with('/') {
            self.problem(
                Problem::new(
                    "srt::recipe::value",
                    file.span,
                    format!("`benchmark.trace_file` must be an absolute path, found `{path}`"),
                )
                .label("relative")
                .help("the benchmark runs on a node of the deployment, in its container where there is one: give the trace's path there"),
            );
            return None;
        }
        let Some(levels) = f.get("concurrencies") else {
            required(
                self,
                "concurrencies",
                "set the levels the trace is replayed at, like `[4, 8]`",
            );
            return None;
        };
        let concurrencies = self.replay_levels(levels)?;
        Some(TraceSource::File {
            path,
            concurrencies,
        })
    }

    /// `trace-replay`'s levels: srtctl joins a list with commas and passes text as it
    /// is to its script, which splits it at commas.
    fn replay_levels(&mut self, n: &Node) -> Option<Vec<u32>> {
        let levels: Option<Vec<u32>> = match &n.value {
            Value::Seq(items) if !items.is_empty() => {
                items.iter().map(|i| level(&i.value)).collect()
            }
            // The script hands each word to aiperf, whose parser reads ` 8` as 8.
            Value::Str(s) => s.split(',').map(|w| level_text(w.trim())).collect(),
            v => level(v).map(|c| vec![c]),
        };
        if levels.is_none() {
            self.problem(
                Problem::new(
                    "srt::recipe::value",
                    n.span,
                    format!("`benchmark.concurrencies` of `trace-replay` must be levels of 1 to {MAX_LEVEL}: a list, a number, or text like \"4,8\""),
                )
                .label("not a list of levels")
                .help("srtctl's replay script splits the text at commas (`4x8` is sa-bench's form): write `[4, 8]`"),
            );
        }
        levels
    }

    /// `benchmark.custom_tokenizer`: a sa-bench tokenizer adapter srt renders, in the
    /// mode the top-level `environment` gives it (srtctl's benchmark step sees it).
    fn tokenizer_adapter(
        &mut self,
        node: &Node,
        runtime: &crate::recipe::runtime::RuntimeKeys,
    ) -> Option<crate::bench::AdapterChat> {
        use crate::bench::{MaxEffort, TokenizerAdapter};
        let class = self.string(node, "benchmark.custom_tokenizer")?;
        if let Some(adapter) = TokenizerAdapter::named(&class) {
            return match adapter.chat(&runtime.environment) {
                Ok(chat) => Some(chat),
                Err(MaxEffort(var)) => {
                    let at = runtime
                        .environment_spans
                        .get(var)
                        .copied()
                        .unwrap_or(node.span);
                    self.problem(
                        Problem::new(
                            "srt::recipe::value",
                            at,
                            format!("`environment.{var}: max` asks `{class}` for DeepSeek-V4's \"max\" reasoning-effort preamble, which srt does not render"),
                        )
                        .label("max effort")
                        .help("srt renders DeepSeek-V4's thinking mode without the preamble: set the effort to `high` (the same prompt without it), or set it in the roles' `env` for the workers only"),
                    );
                    None
                }
            };
        }
        let known = TokenizerAdapter::ALL.map(TokenizerAdapter::class);
        let help = match did_you_mean(&class, known) {
            Some(close) => format!("did you mean `{close}`?"),
            None => format!(
                "srt renders the chats of srtctl's sa-bench adapters {}; without one, the model's own chat template is used",
                known.map(|k| format!("`{k}`")).join(" and ")
            ),
        };
        self.problem(
            Problem::new(
                "srt::recipe::value",
                node.span,
                format!("srt has no sa-bench tokenizer adapter `{class}`"),
            )
            .label("unknown adapter")
            .help(help),
        );
        None
    }

    /// `sensitive_env`: a list of variable names whose values are secrets.
    fn sensitive_env(&mut self, node: Option<&Node>) -> Vec<String> {
        let Some(node) = node else {
            return Vec::new();
        };
        let items = match &node.value {
            Value::Null => return Vec::new(),
            Value::Seq(items) => items,
            _ => {
                self.type_error(node, "sensitive_env", "a list of variable names");
                return Vec::new();
            }
        };
        let mut names = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let Some(name) = self.string(item, &format!("sensitive_env[{i}]")) else {
                continue;
            };
            if !valid_env_name(&name) {
                self.problem(
                    Problem::new(
                        "srt::recipe::env_name",
                        item.span,
                        format!(
                            "`{name}` in `sensitive_env` is not a valid environment variable name"
                        ),
                    )
                    .label("invalid name")
                    .help("names are letters, digits and `_`, not starting with a digit"),
                );
                continue;
            }
            names.push(name);
        }
        names.sort();
        names.dedup();
        names
    }

    /// srtctl recipes often name the served model in role args. The Router, the smoke
    /// probe and every worker must agree on one name, so an args value is the
    /// deployment's served name: the same on every role, and equal to
    /// `model.served_name` when both are written.
    fn served_name_from_args(&mut self, model: &mut Model, explicit: bool, roles: &[Role]) {
        let set: Vec<(&Role, &Arg)> = roles
            .iter()
            .filter_map(|r| Some((r, r.args.get("served-model-name")?)))
            .collect();
        let Some((_, first)) = set.first() else {
            return;
        };
        let ArgValue::Str(name) = &first.value else {
            self.problem(
                Problem::new(
                    "srt::recipe::type",
                    first.value_span,
                    "`served-model-name` must be a string",
                )
                .label("expected a model name"),
            );
            return;
        };
        let conflict = |p: &str| {
            Problem::new(
                "srt::recipe::served_model_name",
                SourceSpan::new(0.into(), 0),
                format!("the served model name is `{name}` in one place and `{p}` in another"),
            )
            .help("the Router and every worker serve one name: set `model.served_name` once and drop `served-model-name` from role args")
        };
        for (role, arg) in &set[1..] {
            if arg.value != first.value {
                let p = conflict(&arg.value.render());
                self.problem(
                    Problem {
                        span: arg.value_span,
                        ..p
                    }
                    .label(format!("`{}` differs", role.kind.name())),
                );
                return;
            }
        }
        if set.len() != roles.len() {
            let (role, arg) = set[0];
            self.problem(
                Problem::new(
                    "srt::recipe::served_model_name",
                    arg.key_span,
                    format!(
                        "only `{}` sets `served-model-name`; the other role would serve `{}`",
                        role.kind.name(),
                        model.served_name
                    ),
                )
                .label("set on one role only")
                .help("set `model.served_name` instead, so every role serves the same name"),
            );
            return;
        }
        if explicit && &model.served_name != name {
            let p = conflict(&model.served_name);
            self.problem(
                Problem {
                    span: first.value_span,
                    ..p
                }
                .label("differs from `model.served_name`"),
            );
            return;
        }
        model.served_name = name.clone();
    }

    fn model(&mut self, node: Option<&Node>, doc: SourceSpan) -> Option<Model> {
        let Some(node) = node else {
            return Some(Model {
                path: Sp::new(
                    keys::default(keys::MODEL, "path"),
                    SourceSpan::new(doc.offset().into(), 0),
                ),
                served_name: "model".into(),
                container: None,
                precision: None,
            });
        };
        let f = self.fields(node, "model", &keys::names(keys::MODEL), &["stage_dir"])?;
        let path = match f.get("path") {
            // srtctl's `hf:org/name` names a Hugging Face model; `vllm serve` takes the
            // bare id, and would treat `hf:org/name` as a (missing) local path.
            Some(p) => {
                let raw = self.string(p, "model.path")?;
                let id = raw.strip_prefix("hf:").map(str::to_string).unwrap_or(raw);
                Sp::new(id, p.span)
            }
            None => Sp::new(keys::default(keys::MODEL, "path"), node.span),
        };
        if path.value.is_empty() {
            self.problem(
                Problem::new(
                    "srt::recipe::model_path",
                    path.span,
                    "`model.path` is empty",
                )
                .label("empty"),
            );
        }
        self.not_option_like(&path.value, path.span, "model.path");
        if let Some(node) = f.get("served_name") {
            if let Value::Str(s) = &node.value {
                self.not_option_like(s, node.span, "model.served_name");
            }
        }
        let served_name = self.opt_string(&f, "served_name").unwrap_or_else(|| {
            path.value
                .trim_end_matches('/')
                .rsplit(['/', ':'])
                .next()
                .unwrap_or("model")
                .to_string()
        });
        let container = self.opt_string(&f, "container");
        let precision = self.opt_string(&f, "precision");
        Some(Model {
            path,
            served_name,
            container,
            precision,
        })
    }

    fn resources(&mut self, node: Option<&Node>, doc: SourceSpan) -> Option<Resources> {
        let Some(node) = node else {
            return Some(Resources {
                gpus_per_node: Sp::new(
                    keys::default(keys::RESOURCES, "gpus_per_node"),
                    SourceSpan::new(doc.offset().into(), 0),
                ),
                gpu_type: None,
                spread_workers: false,
            });
        };
        let f = self.fields(
            node,
            "resources",
            &keys::names(keys::RESOURCES),
            SRTCTL_ONLY_RESOURCES,
        )?;
        let gpus_per_node = match f.get("gpus_per_node") {
            Some(n) => Sp::new(
                self.uint(
                    n,
                    "resources.gpus_per_node",
                    1,
                    crate::recipe::limits::MAX_GPUS_PER_NODE as i64,
                )? as u32,
                n.span,
            ),
            None => Sp::new(keys::default(keys::RESOURCES, "gpus_per_node"), node.span),
        };
        let gpu_type = self.opt_string(&f, "gpu_type");
        let spread_workers = self.bool_field(&f, "spread_workers", false).value;
        Some(Resources {
            gpus_per_node,
            gpu_type,
            spread_workers,
        })
    }

    fn engine(&mut self, node: Option<&Node>, doc: SourceSpan) -> Option<Engine> {
        let span = node
            .map(|n| n.span)
            .unwrap_or(SourceSpan::new(doc.offset().into(), 0));
        let mut engine = Engine {
            kind: Sp::new(keys::default(keys::ENGINE, "type"), span),
            span,
            keys: Section {
                key_span: span,
                entries: Vec::new(),
            },
            allow_prefill_decode_colocation: false,
        };
        let Some(node) = node else {
            return Some(engine);
        };
        match &node.value {
            Value::Str(s) => engine.kind = Sp::new(s.clone(), node.span),
            Value::Map(entries) => {
                match entries.iter().find(|(k, _)| k.name == "type") {
                    Some((_, t)) => {
                        engine.kind = Sp::new(self.string(t, "engine.type")?, t.span);
                    }
                    None => self.problem(
                        Problem::new(
                            "srt::recipe::missing_key",
                            node.span,
                            "`engine.type` is missing",
                        )
                        .label("this engine mapping")
                        .help("add `type: vllm`"),
                    ),
                }
                engine.keys.entries = self.engine_keys(entries);
                if let Some((_, v)) = entries.iter().find(|(k, _)| k.name == COLOCATION) {
                    match v.value {
                        Value::Bool(b) => engine.allow_prefill_decode_colocation = b,
                        _ => self.type_error(v, &format!("engine.{COLOCATION}"), "a boolean"),
                    }
                }
            }
            _ => {
                self.type_error(node, "engine", "an engine name or a mapping");
                return None;
            }
        }
        Some(engine)
    }

    /// The engine mapping's keys besides `type`, as written (the engine checks them),
    /// but srtctl's that srt refuses.
    fn engine_keys(&mut self, entries: &[(Key, Node)]) -> Vec<Arg> {
        let mut out = Vec::new();
        for (k, v) in entries
            .iter()
            .filter(|(k, _)| k.name != "type" && k.name != COLOCATION)
        {
            if SRTCTL_ONLY_ENGINE.contains(&k.name.as_str()) {
                self.problem(
                    Problem::new(
                        "srt::recipe::unsupported_key",
                        k.span,
                        format!(
                            "`engine.{}` is an srtctl key that srt does not support",
                            k.name
                        ),
                    )
                    .label("not supported")
                    .help(
                        "remove it; srt refuses keys it would otherwise ignore \
                         (see docs/recipe-reference.md for what srt reads)",
                    ),
                );
                continue;
            }
            let Some(value) = self.arg_value(v, &format!("engine.{}", k.name)) else {
                continue;
            };
            out.push(Arg {
                key: k.name.clone(),
                key_span: k.span,
                value,
                value_span: v.span,
            });
        }
        out
    }

    fn roles(&mut self, node: &Node, key_span: SourceSpan) -> Vec<Role> {
        let Some(f) = self.fields(node, "roles", &keys::names(keys::ROLES), &[]) else {
            return Vec::new();
        };
        if f.entries.is_empty() {
            self.problem(
                Problem::new(
                    "srt::recipe::no_roles",
                    key_span,
                    "`roles` declares no role",
                )
                .label("no prefill, decode or agg")
                .help("add `agg:`, or `prefill:` and `decode:`"),
            );
            return Vec::new();
        }
        let mut roles = Vec::new();
        for kind in RoleKind::ALL {
            let (Some(role_node), Some(key_span)) = (f.get(kind.name()), f.key_span(kind.name()))
            else {
                continue;
            };
            if let Some(role) = self.role(kind, role_node, key_span) {
                roles.push(role);
            }
        }
        roles
    }

    fn role(&mut self, kind: RoleKind, node: &Node, key_span: SourceSpan) -> Option<Role> {
        let path = format!("roles.{}", kind.name());
        let f = self.fields(node, &path, &keys::names(keys::ROLE), SRTCTL_ONLY_ROLE)?;
        let nodes = match f.get("nodes") {
            Some(n) => match &n.value {
                Value::Str(s) if s == "colocate" => Sp::new(Nodes::Colocate, n.span),
                Value::Int(_) => Sp::new(
                    Nodes::Count(self.uint(
                        n,
                        &f.at("nodes"),
                        1,
                        crate::recipe::limits::MAX_NODES as i64,
                    )? as u32),
                    n.span,
                ),
                _ => {
                    self.type_error(n, &f.at("nodes"), "a node count or `colocate`");
                    return None;
                }
            },
            None => {
                self.problem(
                    Problem::new(
                        "srt::recipe::missing_key",
                        key_span,
                        format!("`{path}.nodes` is missing"),
                    )
                    .label("this role")
                    .help("add `nodes: <count>` (or `colocate` on decode)"),
                );
                return None;
            }
        };
        let workers = match self.u32_field(
            &f,
            "workers",
            1,
            crate::recipe::limits::MAX_PROCESSES as i64,
        ) {
            Some(w) => w,
            None if f.get("workers").is_some() => return None,
            None => {
                self.problem(
                    Problem::new(
                        "srt::recipe::missing_key",
                        key_span,
                        format!("`{path}.workers` is missing"),
                    )
                    .label("this role")
                    .help("add `workers: <count>`: the number of logical endpoints of this role"),
                );
                return None;
            }
        };
        let gpus = self.u32_field(
            &f,
            "gpus",
            1,
            (crate::recipe::limits::MAX_NODES * crate::recipe::limits::MAX_GPUS_PER_NODE) as i64,
        );
        // Read both ways, as flags and as a config file: the assembly keeps the one the
        // engine reads (`crate::engine::ArgsForm`), with what is wrong with it. Either
        // way it is a mapping.
        let written = self.role_args(f.get("args"), &f.at("args"));
        let config = written.cloned();
        let before = self.problems.0.len();
        let mut args = self.args(written, &f.at("args"));
        let connector = self.role_connector(&mut args, &path);
        let flag_problems = self.problems.0.split_off(before);
        let env = self.env(&f, "env");
        let env_spans = self.env_spans(&f, "env");
        Some(Role {
            kind,
            span: key_span,
            nodes,
            workers,
            gpus,
            args,
            flag_problems,
            config,
            connector,
            env,
            env_spans,
        })
    }

    /// `args.connector`, taken out of the role's flags: a per-role connector override.
    fn role_connector(&mut self, args: &mut Args, path: &str) -> Option<Sp<String>> {
        let pos = args.0.iter().position(|a| a.key == "connector")?;
        let arg = args.0.remove(pos);
        let name = match arg.value {
            ArgValue::Str(s) => s,
            ArgValue::Null => "none".into(),
            other => {
                self.problem(
                    Problem::new(
                        "srt::recipe::type",
                        arg.value_span,
                        format!(
                            "`{path}.args.connector` must be a connector name, found `{}`",
                            other.render()
                        ),
                    )
                    .label("expected a connector name"),
                );
                return None;
            }
        };
        Some(Sp::new(name, arg.value_span))
    }

    /// A role's `args` as written, when it is a mapping (a non-mapping is the problem
    /// here, whichever way the engine reads it; `null` is none).
    fn role_args<'n>(&mut self, node: Option<&'n Node>, path: &str) -> Option<&'n Node> {
        let node = node?;
        match &node.value {
            Value::Map(_) => Some(node),
            Value::Null => None,
            _ => {
                self.type_error(
                    node,
                    path,
                    "a mapping of the engine's flags (or config keys) to values",
                );
                None
            }
        }
    }

    fn frontend(&mut self, node: Option<&Node>, key_span: Option<SourceSpan>) -> Option<Frontend> {
        let span = key_span.unwrap_or(SourceSpan::new(0.into(), 0));
        let mut fe = Frontend {
            span,
            kind: Sp::new(keys::default(keys::FRONTEND, "type"), span),
            args: Args::default(),
            env: BTreeMap::new(),
            env_spans: BTreeMap::new(),
            enable_multiple_frontends: Sp::new(
                keys::default(keys::FRONTEND, "enable_multiple_frontends"),
                span,
            ),
            num_additional_frontends: Sp::new(
                keys::default(keys::FRONTEND, "num_additional_frontends"),
                span,
            ),
            orchestrator_placement: Sp::new(Placement::Head, span),
            container_image: None,
            port: Sp::new(keys::default(keys::FRONTEND, "port"), span),
            binary: None,
            nginx: Nginx::default(),
        };
        let Some(node) = node else { return Some(fe) };
        let f = self.fields(
            node,
            "frontend",
            &keys::names(keys::FRONTEND),
            SRTCTL_ONLY_FRONTEND,
        )?;
        if let Some(t) = f.get("type") {
            fe.kind = Sp::new(self.string(t, "frontend.type")?, t.span);
        }
        fe.args = self.args(f.get("args"), "frontend.args");
        fe.env = self.env(&f, "env");
        fe.env_spans = self.env_spans(&f, "env");
        fe.enable_multiple_frontends = self.bool_field(&f, "enable_multiple_frontends", true);
        if f.get("enable_multiple_frontends").is_none() {
            // Defaulted: the span of the parent key, like every other defaulted field.
            fe.enable_multiple_frontends.span = span;
        }
        if let Some(n) = f.get("num_additional_frontends") {
            fe.num_additional_frontends = Sp::new(
                self.uint(n, "frontend.num_additional_frontends", 0, 1024)? as u32,
                n.span,
            );
        }
        if let Some(p) = f.get("orchestrator_placement") {
            let placement = match self.string(p, "frontend.orchestrator_placement")?.as_str() {
                "head" => Placement::Head,
                "first_decode" => Placement::FirstDecode,
                other => {
                    self.problem(
                        Problem::new(
                            "srt::recipe::value",
                            p.span,
                            format!("unknown `frontend.orchestrator_placement` `{other}`"),
                        )
                        .label("unknown placement")
                        .help("expected `head` or `first_decode`"),
                    );
                    return None;
                }
            };
            fe.orchestrator_placement = Sp::new(placement, p.span);
        }
        fe.container_image = self.opt_string(&f, "container_image");
        if let Some(p) = f.get("port") {
            fe.port = Sp::new(self.uint(p, "frontend.port", 1, 65535)? as u16, p.span);
        }
        fe.binary = self.opt_string(&f, "binary");
        if let Some(node) = f.get("nginx") {
            fe.nginx = self.nginx(node, f.key_span("nginx").unwrap_or(node.span))?;
        }
        if let Some(node) = f.get("nginx_image") {
            if fe.nginx.image.is_some() {
                self.problem(
                    Problem::new(
                        "srt::recipe::conflict",
                        node.span,
                        "`frontend.nginx_image` and `frontend.nginx.image` both name nginx's image",
                    )
                    .label("set one of them")
                    .help("`nginx_image` is srtctl's spelling of `nginx.image`"),
                );
            }
            fe.nginx.image = self.opt_string(&f, "nginx_image");
        }
        self.srtctl_nginx(&f, &mut fe.nginx);
        Some(fe)
    }

    fn nginx(&mut self, node: &Node, key_span: SourceSpan) -> Option<Nginx> {
        let mut n = Nginx {
            span: Some(key_span),
            ..Nginx::default()
        };
        let f = self.fields(node, "frontend.nginx", &keys::names(keys::NGINX), &[])?;
        n.image = self.opt_string(&f, "image");
        if let Some(v) = f.get("worker_processes") {
            n.worker_processes = match &v.value {
                Value::Str(s) if s == "auto" => None,
                Value::Int(_) => {
                    Some(self.uint(v, "frontend.nginx.worker_processes", 1, 1024)? as u32)
                }
                _ => {
                    self.type_error(v, "frontend.nginx.worker_processes", "`auto` or an integer");
                    return None;
                }
            };
        }
        if let Some(v) = f.get("worker_connections") {
            n.worker_connections =
                self.uint(v, "frontend.nginx.worker_connections", 16, 1 << 20)? as u32;
            n.worker_rlimit_nofile = n.worker_connections.saturating_mul(2);
        }
        if let Some(v) = f.get("worker_rlimit_nofile") {
            n.worker_rlimit_nofile =
                self.uint(v, "frontend.nginx.worker_rlimit_nofile", 64, 1 << 20)? as u32;
        }
        if let Some(v) = f.get("upstream_keepalive") {
            n.upstream_keepalive =
                self.uint(v, "frontend.nginx.upstream_keepalive", 0, 1 << 20)? as u32;
        }
        if let Some(v) = f.get("keepalive_timeout_seconds") {
            n.keepalive_timeout_secs =
                self.uint(v, "frontend.nginx.keepalive_timeout_seconds", 0, 86400)? as u32;
        }
        if let Some(v) = f.get("client_max_body_size") {
            let size = match &v.value {
                Value::Int(i) if *i >= 0 => i.to_string(),
                _ => self.string(v, "frontend.nginx.client_max_body_size")?,
            };
            let digits = size.trim_end_matches(['k', 'K', 'm', 'M', 'g', 'G']);
            let suffix = size.len() - digits.len();
            if digits.is_empty() || suffix > 1 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                self.problem(
                    Problem::new(
                        "srt::recipe::value",
                        v.span,
                        format!("`frontend.nginx.client_max_body_size` `{size}` is not an nginx size"),
                    )
                    .label("not a size")
                    .help("write a number of bytes with an optional k, m or g: `45m`, `1g`, `0` for no limit"),
                );
                return None;
            }
            n.client_max_body_size = size;
        }
        if let Some(v) = f.get("session_header") {
            n.session_header = Some(self.header_name(v, "frontend.nginx.session_header")?);
        }
        Some(n)
    }

    /// An HTTP header name as nginx's `$http_` variables name it: letters, digits and
    /// `-` only (nothing else may reach nginx's configuration).
    fn header_name(&mut self, node: &Node, path: &str) -> Option<String> {
        let name = self.string(node, path)?;
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            self.problem(
                Problem::new(
                    "srt::recipe::value",
                    node.span,
                    format!("`{path}` `{name}` is not a header name"),
                )
                .label("not a header name")
                .help("write a header name of letters, digits and `-` (`X-Dynamo-Session-ID`)"),
            );
            return None;
        }
        Some(name)
    }

    /// srtctl's nginx keys of `frontend` (`nginx_session_affinity` with its header,
    /// `nginx_raise_ulimit`), as the `frontend.nginx` settings they stand for.
    fn srtctl_nginx(&mut self, f: &Fields, nginx: &mut Nginx) {
        let header = f.get("nginx_session_affinity_header");
        match f.get("nginx_session_affinity").map(|n| (n, &n.value)) {
            Some((_, Value::Bool(true))) => {
                let name = match header {
                    Some(h) => self.header_name(h, "frontend.nginx_session_affinity_header"),
                    None => Some(SRTCTL_SESSION_HEADER.to_string()),
                };
                if nginx.session_header.is_some() {
                    self.conflict(f, "nginx_session_affinity", "`frontend.nginx_session_affinity` and `frontend.nginx.session_header` both set the session header");
                } else {
                    nginx.session_header = name;
                }
            }
            Some((_, Value::Bool(false))) | None => {
                if let Some(h) = header {
                    self.problem(
                        Problem::new(
                            "srt::recipe::value",
                            h.span,
                            "`frontend.nginx_session_affinity_header` without `nginx_session_affinity: true` does nothing",
                        )
                        .label("no session affinity")
                        .help("set `frontend.nginx_session_affinity: true`, or remove the header"),
                    );
                }
            }
            Some((n, _)) => self.type_error(n, "frontend.nginx_session_affinity", "true or false"),
        }
        match f.get("nginx_raise_ulimit").map(|n| (n, &n.value)) {
            Some((_, Value::Bool(true))) => {
                if nginx.worker_rlimit_nofile != nginx.worker_connections.saturating_mul(2) {
                    self.conflict(f, "nginx_raise_ulimit", "`frontend.nginx_raise_ulimit` and `frontend.nginx.worker_rlimit_nofile` both set nginx's open-file limit");
                } else {
                    nginx.worker_rlimit_nofile = SRTCTL_RAISED_NOFILE;
                }
            }
            Some((_, Value::Bool(false))) | None => {}
            Some((n, _)) => self.type_error(n, "frontend.nginx_raise_ulimit", "true or false"),
        }
    }

    fn conflict(&mut self, f: &Fields, key: &str, message: &str) {
        let at = f.key_span(key).unwrap_or(f.span);
        self.problem(
            Problem::new("srt::recipe::conflict", at, message.to_string())
                .label("set one of them")
                .help("srtctl's key is the other's spelling: keep one"),
        );
    }

    fn rollout(&mut self, node: Option<&Node>) -> Option<Rollout> {
        let mut out = Rollout::default();
        let Some(node) = node else { return Some(out) };
        let f = self.fields(node, "rollout", &keys::names(keys::ROLLOUT), &[])?;
        if let Some(n) = f.get("max_unavailable") {
            out.max_unavailable = self.amount(n, "rollout.max_unavailable", 1)?;
        }
        if let Some(n) = f.get("max_surge") {
            let surge = self.amount(n, "rollout.max_surge", 0)?;
            if !matches!(surge, Amount::Count(0) | Amount::Percent(0)) {
                self.problem(
                    Problem::new(
                        "srt::recipe::max_surge",
                        n.span,
                        "`rollout.max_surge` above 0 is not supported: a worker's replacement binds the same ports and GPUs as the worker it replaces, so it cannot start first",
                    )
                    .label("needs spare ports and GPUs per worker")
                    .help("remove it; `rollout.max_unavailable` sets how many workers are replaced at once"),
                );
                return None;
            }
        }
        if let Some(n) = f.get("drain_seconds") {
            out.drain_secs = self.uint(n, "rollout.drain_seconds", 0, 3600)? as u64;
        }
        if let Some(n) = f.get("min_ready_seconds") {
            out.min_ready_secs = self.uint(n, "rollout.min_ready_seconds", 0, 3600)? as u64;
        }
        Some(out)
    }

    /// A count (at least `min`) or a percentage `N%` (0..=100).
    fn amount(&mut self, node: &Node, path: &str, min: i64) -> Option<Amount> {
        if let Value::Str(s) = &node.value {
            let percent = s
                .strip_suffix('%')
                .and_then(|p| p.parse::<u32>().ok())
                .filter(|p| *p <= 100 && i64::from(*p) >= min);
            return match percent {
                Some(p) => Some(Amount::Percent(p)),
                None => {
                    self.problem(
                        Problem::new(
                            "srt::recipe::range",
                            node.span,
                            format!("`{path}` must be a count or a percentage from {min}% to 100%, found `{s}`"),
                        )
                        .label("not a count or percentage"),
                    );
                    None
                }
            };
        }
        let n = self.uint(node, path, min, crate::recipe::limits::MAX_PROCESSES as i64)?;
        Some(Amount::Count(n as u32))
    }

    fn health_check(&mut self, node: Option<&Node>) -> Option<HealthCheck> {
        let mut hc = HealthCheck::default();
        let Some(node) = node else { return Some(hc) };
        let f = self.fields(node, "health_check", &keys::names(keys::HEALTH_CHECK), &[])?;
        if let Some(n) = f.get("unhealthy_grace_seconds") {
            hc.unhealthy_grace_secs =
                self.uint(n, "health_check.unhealthy_grace_seconds", 1, 3600)? as u64;
        }
        if let Some(n) = f.get("interval_seconds") {
            hc.interval_secs = self.uint(n, "health_check.interval_seconds", 1, 3600)? as u64;
        }
        match (f.get("timeout_seconds"), f.get("max_attempts")) {
            (Some(t), Some(_)) => {
                self.problem(
                    Problem::new(
                        "srt::recipe::conflict",
                        t.span,
                        "`health_check.timeout_seconds` and `health_check.max_attempts` both set the budget",
                    )
                    .label("set one of them")
                    .help("max_attempts x interval_seconds is the srtctl form; timeout_seconds is the direct one"),
                );
            }
            (Some(t), None) => {
                hc.timeout_secs =
                    self.uint(t, "health_check.timeout_seconds", 1, 7 * 86400)? as u64;
            }
            (None, Some(a)) => {
                let attempts = self.uint(a, "health_check.max_attempts", 1, 1_000_000)? as u64;
                hc.timeout_secs = attempts * hc.interval_secs;
            }
            (None, None) => {}
        }
        Some(hc)
    }
}

fn to_json(node: &Node) -> serde_json::Value {
    use serde_json::Value as J;
    match &node.value {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => J::from(*i),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(J::Number)
            .unwrap_or(J::Null),
        Value::Str(s) => J::String(s.clone()),
        Value::Seq(items) => J::Array(items.iter().map(to_json).collect()),
        Value::Map(entries) => J::Object(
            entries
                .iter()
                .map(|(k, v)| (k.name.clone(), to_json(v)))
                .collect(),
        ),
    }
}

/// The longest deployment name: srtctl's recipe names run past 64 characters.
pub const MAX_NAME_BYTES: usize = 128;

/// Deployment names become directory names and log prefixes.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && name.len() <= MAX_NAME_BYTES
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A valid name close to `stem`, to suggest when a file name is not one.
fn sanitize_name(stem: &str) -> Option<String> {
    let cleaned: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = cleaned.trim_start_matches(['-', '_', '.']);
    let name: String = trimmed.chars().take(64).collect();
    valid_name(&name).then_some(name)
}

fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Read and load a recipe file. The [`Source`] is returned either way so later stages can
/// report problems against it. An unreadable or non-UTF-8 file is a diagnostic too.
pub fn load_file(path: &std::path::Path) -> (Source, Result<Recipe, RecipeError>) {
    load_file_selected(path, &Selection::default())
}

/// [`load_file`] of the recipe `selection` picks from an srtctl override file.
pub fn load_file_selected(
    path: &std::path::Path,
    selection: &Selection,
) -> (Source, Result<Recipe, RecipeError>) {
    let stem = default_name(path);
    match read_source(path) {
        (source, None) => {
            let result = load_selected(&source, &stem, selection);
            (source, result)
        }
        (source, Some(err)) => (source, Err(err)),
    }
}

/// The deployment a recipe file names when it writes no `name:`: its file stem
/// (`recipes/agg.yaml` is `agg`).
pub fn default_name(path: &std::path::Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A recipe file's text, read up to [`MAX_RECIPE_BYTES`]; an unreadable, oversized or
/// non-UTF-8 file is a diagnostic (beside what was read, to show it against).
pub fn read_source(path: &std::path::Path) -> (Source, Option<RecipeError>) {
    let name = path.display().to_string();
    let empty = SourceSpan::new(0.into(), 0);
    // Read one byte past the limit at most: enough to tell an oversized file apart.
    let read = std::fs::File::open(path).and_then(|f| {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(f, MAX_RECIPE_BYTES as u64 + 1),
            &mut bytes,
        )?;
        Ok(bytes)
    });
    let bytes = match read {
        Ok(b) if b.len() > MAX_RECIPE_BYTES => {
            let source = Source {
                name,
                text: String::from_utf8_lossy(&b).into_owned(),
            };
            let err = oversized(&source).expect("longer than the limit");
            return (source, Some(err));
        }
        Ok(b) => b,
        Err(e) => {
            let source = Source {
                name,
                text: String::new(),
            };
            let err = source.error(vec![Problem::new(
                "srt::recipe::read",
                empty,
                format!("cannot read {}: {e}", path.display()),
            )]);
            return (source, Some(err));
        }
    };
    match String::from_utf8(bytes) {
        Ok(text) => (Source { name, text }, None),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
            let source = Source { name, text };
            let err = source.error(vec![Problem::new(
                "srt::recipe::encoding",
                SourceSpan::new(valid.into(), 1),
                format!("the recipe is not valid UTF-8 (first bad byte at offset {valid})"),
            )
            .label("invalid UTF-8 here")]);
            (source, Some(err))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the fuzzer: a syntax error next to control characters. The error's
    /// spans point into the text it shows (escaped), and the report draws.
    #[test]
    fn syntax_error_next_to_control_characters_points_inside_the_shown_text() {
        // Both inputs crashed the fuzzer: a span measured in the raw text was drawn
        // against the escaped one.
        for text in [
            "roles:\n  agg:\n     agg:\n \u{1e}\0",
            "resources:\n  gpus_per+_node: 2\nroles:\n  ag4\n\nengine: vllm\nesol1workers: ;\u{0}1\n",
        ] {
            let source = Source {
                name: "fuzz.yaml".into(),
                text: text.into(),
            };
            let err = load_str(&source, "fuzz").expect_err("not a recipe");
            let shown = err.source_code.inner();
            assert!(shown.len() > source.text.len(), "controls are escaped");
            for p in &err.problems {
                assert!(p.span.offset() + p.span.len() <= shown.len(), "{p:?}");
            }
            let mut out = String::new();
            miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
                .render_report(&mut out, &err)
                .expect("renders");
            assert!(out.contains("error"), "{out}");
        }
    }
}

#[cfg(test)]
mod srtctl_keys {
    use super::*;

    fn codes(resources: &str) -> Vec<&'static str> {
        let source = Source {
            name: "r.yaml".into(),
            text: format!(
                "schema: 2\nresources:\n  gpus_per_node: 4\n{resources}roles:\n  agg: {{nodes: 1, workers: 1}}\n"
            ),
        };
        match load_problems(&source, "r") {
            Ok(_) => Vec::new(),
            Err(p) => p.iter().map(|p| p.code).collect(),
        }
    }

    /// `het_jobs: false` asks for what srt does (srtctl's default); `true`, or another
    /// srtctl-only key, is refused at the key.
    #[test]
    fn het_jobs_false_is_accepted_and_true_refused() {
        assert!(codes("  het_jobs: false\n").is_empty());
        assert_eq!(
            codes("  het_jobs: true\n"),
            ["srt::recipe::unsupported_key"]
        );
        assert_eq!(
            codes("  prefill_critical: true\n"),
            ["srt::recipe::unsupported_key"]
        );
        assert!(codes("  spread_workers: true\n").is_empty());
    }

    fn nginx(frontend: &str) -> Result<Nginx, Vec<&'static str>> {
        let source = Source {
            name: "r.yaml".into(),
            text: format!(
                "schema: 2\nfrontend:\n  enable_multiple_frontends: true\n{frontend}roles:\n  agg: {{nodes: 2, workers: 2}}\n"
            ),
        };
        load_problems(&source, "r")
            .map(|r| r.frontend.nginx)
            .map_err(|p| p.iter().map(|p| p.code).collect())
    }

    /// srtctl's nginx keys are the `frontend.nginx` settings they stand for.
    #[test]
    fn srtctl_nginx_keys_are_nginx_settings() {
        let n = nginx("  nginx_session_affinity: true\n").unwrap();
        assert_eq!(n.session_header.as_deref(), Some("X-Dynamo-Session-ID"));
        let n = nginx(
            "  nginx_session_affinity: true\n  nginx_session_affinity_header: X-Correlation-ID\n",
        )
        .unwrap();
        assert_eq!(n.session_header.as_deref(), Some("X-Correlation-ID"));
        assert_eq!(
            nginx("  nginx_session_affinity: false\n")
                .unwrap()
                .session_header,
            None
        );
        let n = nginx("  nginx_raise_ulimit: true\n").unwrap();
        assert_eq!(n.worker_rlimit_nofile, 1_048_576);
        let n =
            nginx("  nginx_raise_ulimit: true\n  nginx:\n    worker_connections: 1024\n").unwrap();
        assert_eq!(n.worker_rlimit_nofile, 1_048_576);
        assert_eq!(
            nginx("  nginx_raise_ulimit: true\n  nginx:\n    worker_rlimit_nofile: 4096\n"),
            Err(vec!["srt::recipe::conflict"])
        );
        assert_eq!(
            nginx("  nginx_session_affinity: true\n  nginx:\n    session_header: X-A\n"),
            Err(vec!["srt::recipe::conflict"])
        );
    }
}
