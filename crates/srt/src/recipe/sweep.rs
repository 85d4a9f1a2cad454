//! `sweep:`, one recipe standing for several: the expansion of its points on the
//! spanned tree, so every problem points at the user's key and every point's recipe
//! keeps the spans of the text it came from.
//!
//! srtctl's form is a mapping of parameters to lists of values, expanded as their
//! Cartesian product in key order (the last parameter varies fastest, as
//! `itertools.product`):
//!
//! ```yaml
//! sweep:
//!   tp: [1, 2]
//!   conc: [4, 16]        # 4 points: tp1_conc4, tp1_conc16, tp2_conc4, tp2_conc16
//! ```
//!
//! srt adds `zip:`, a mapping of parameters whose values go together (the i-th of each),
//! a list of length 1 standing for every i; it is one axis of the product, at its place
//! among the other keys:
//!
//! ```yaml
//! sweep:
//!   zip:
//!     tp: [1, 2, 4]
//!     dp: [4, 2, 1]
//!     isl: [1024]        # 3 points: tp1_dp4_isl1024, tp2_dp2_isl1024, tp4_dp1_isl1024
//! ```
//!
//! In every string value outside `sweep:` (keys are left as written, as srtctl does),
//! `{param}` is replaced by the point's value; a string that is exactly `"{param}"`
//! becomes the value itself, with its type (`tensor-parallel-size: "{tp}"` is the
//! integer). Inside a longer string a value is written as Python's `str()` writes it,
//! a list as its items joined by commas, as srtctl does. A point is named
//! `NAME_param1value1_param2value2` ([`Point::name`]).

use super::diag::{did_you_mean, Problem};
use super::yaml::{Key, Node, Value};
use miette::SourceSpan;
use std::collections::BTreeSet;

/// The most points a sweep may expand to.
pub const MAX_POINTS: usize = 1024;

/// The most nodes all the points' recipes may hold together (points x the recipe's
/// nodes), so a large recipe swept over many values is refused before it is copied.
pub const MAX_EXPANDED_NODES: usize = 1_000_000;

/// The reserved key of a `sweep:` block that holds parameters zipped together.
pub const ZIP: &str = "zip";

/// One point of a sweep: its parameter values and its recipe.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Every parameter with this point's value, in the order of the `sweep:` block.
    pub params: Vec<(String, Value)>,
    /// The recipe with the values put in and the `sweep` key removed. Substituted
    /// values keep the span of the placeholder they replaced.
    pub recipe: Node,
}

impl Point {
    /// `param1value1_param2value2`: the point's part of its name (empty without
    /// parameters).
    pub fn suffix(&self) -> String {
        self.params
            .iter()
            .map(|(k, v)| format!("{k}{}", py_str(v)))
            .collect::<Vec<_>>()
            .join("_")
    }

    /// The point's name as srtctl names it, `BASE_param1value1_param2value2` (`base`
    /// alone for a recipe without a sweep).
    pub fn name(&self, base: &str) -> String {
        match self.params.is_empty() {
            true => base.to_string(),
            false => format!("{base}_{}", self.suffix()),
        }
    }

    /// `tp=1, conc=4`: the parameters for messages.
    pub fn describe(&self) -> String {
        self.params
            .iter()
            .map(|(k, v)| format!("{k}={}", py_str(v)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What a sweep's file read as one recipe is: its first point, said where the problems
/// of that point are reported, so a value that came from a placeholder is understood.
pub fn read_as(point: &super::SweepPoint) -> Problem {
    let which = format!(
        "this recipe is a sweep of {} points; this is point {} of {} ({})",
        point.of,
        point.index + 1,
        point.of,
        point.params
    );
    let message = match &point.unfit {
        None => which,
        Some(u) if u.count >= point.of => format!(
            "{which}; no point's parallel sizes fit its GPUs ({}: {})",
            u.first, u.reason
        ),
        Some(u) => format!(
            "{which}, the first whose parallel sizes fit its GPUs: {} before it do not ({}: {})",
            u.count, u.first, u.reason
        ),
    };
    Problem::warning("srt::recipe::sweep_point", point.key, message)
        .label("a sweep")
        .help("`srt sweep -f RECIPE` plans and runs every point that fits in one deployment; see docs/sweeps.md")
}

/// The `sweep` key of a recipe, when it has one.
pub fn sweep_key(root: &Node) -> Option<(&Key, &Node)> {
    let Value::Map(entries) = &root.value else {
        return None;
    };
    entries
        .iter()
        .find(|(k, _)| k.name == "sweep")
        .map(|(k, v)| (k, v))
}

/// Whether the recipe has a `sweep:` block.
pub fn is_sweep(root: &Node) -> bool {
    sweep_key(root).is_some()
}

/// The points of a recipe, in sweep order: one point without parameters (the recipe
/// itself) when it has no `sweep:`. Every problem of the block and of the placeholders
/// is reported at once.
pub fn points(root: &Node) -> Result<Vec<Point>, Vec<Problem>> {
    let sweep = Sweep::new(root)?;
    Ok((0..sweep.len()).map(|i| sweep.point(i)).collect())
}

/// A recipe's sweep, checked: its points made one at a time ([`Sweep::point`]).
#[derive(Debug)]
pub struct Sweep {
    axes: Vec<Axis>,
    template: Node,
    len: usize,
    key: Option<SourceSpan>,
    /// What srt goes on with and says: a parameter nothing uses
    /// (`srt::recipe::sweep_unused`, which srtctl ignores).
    pub warnings: Vec<Problem>,
}

impl Sweep {
    /// The sweep of `root` (of one point when it has no `sweep:`), every problem of the
    /// block and of the placeholders reported at once.
    pub fn new(root: &Node) -> Result<Sweep, Vec<Problem>> {
        let Some((key, block)) = sweep_key(root) else {
            return Ok(Sweep {
                axes: Vec::new(),
                template: root.clone(),
                len: 1,
                key: None,
                warnings: Vec::new(),
            });
        };
        let mut problems = Vec::new();
        let axes = axes(key, block, &mut problems);
        let template = without_sweep(root);
        let params: Vec<&Param> = axes.iter().flat_map(Axis::params).collect();
        check_template(&template, &params, &declared(block), &mut problems);
        let len = point_count(key, &axes, &template, &mut problems);
        if problems.iter().all(Problem::is_warning) {
            problems.extend(repeated(key, &axes, len));
        }
        if problems.iter().any(|p| !p.is_warning()) {
            return Err(problems);
        }
        Ok(Sweep {
            axes,
            template,
            len,
            key: Some(key.span),
            warnings: problems,
        })
    }

    /// How many points.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no point (never: a sweep has at least one).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `sweep` key's span, when the recipe has one.
    pub fn key(&self) -> Option<SourceSpan> {
        self.key
    }

    /// Point `i` (from 0), in sweep order.
    ///
    /// # Panics
    /// When `i` is not below [`Sweep::len`].
    pub fn point(&self, i: usize) -> Point {
        assert!(i < self.len, "point {i} of a sweep of {}", self.len);
        let values = pick(&self.axes, i);
        Point {
            recipe: substitute(&self.template, &values),
            params: values
                .into_iter()
                .map(|(p, v)| (p.name.clone(), v.value.clone()))
                .collect(),
        }
    }
}

/// One swept parameter: its key and its values.
#[derive(Debug)]
struct Param {
    name: String,
    span: SourceSpan,
    values: Vec<Node>,
}

/// One axis of the product: a parameter, or parameters zipped together.
#[derive(Debug)]
enum Axis {
    Grid(Param),
    Zip { len: usize, params: Vec<Param> },
}

impl Axis {
    fn len(&self) -> usize {
        match self {
            Axis::Grid(p) => p.values.len(),
            Axis::Zip { len, .. } => *len,
        }
    }

    fn params(&self) -> Box<dyn Iterator<Item = &Param> + '_> {
        match self {
            Axis::Grid(p) => Box::new(std::iter::once(p)),
            Axis::Zip { params, .. } => Box::new(params.iter()),
        }
    }
}

fn problem(code: &'static str, span: SourceSpan, message: impl Into<String>) -> Problem {
    Problem::new(code, span, message)
}

/// The axes of the `sweep:` block, in key order.
fn axes(key: &Key, block: &Node, problems: &mut Vec<Problem>) -> Vec<Axis> {
    let Value::Map(entries) = &block.value else {
        problems.push(
            problem(
                "srt::recipe::sweep",
                block.span,
                format!(
                    "`sweep` must be a mapping of parameters to lists of values, not {}",
                    block.value.kind()
                ),
            )
            .label("not a mapping")
            .help("write `sweep: {tp: [1, 2], conc: [4, 16]}`; see docs/sweeps.md"),
        );
        return Vec::new();
    };
    if entries.is_empty() {
        problems.push(
            problem("srt::recipe::sweep", key.span, "`sweep` has no parameter")
                .label("empty sweep")
                .help("give at least one parameter and its values, e.g. `sweep: {conc: [4, 16]}`, or remove `sweep`"),
        );
    }
    let mut seen = BTreeSet::new();
    let mut axes = Vec::new();
    for (k, v) in entries {
        if k.name == ZIP {
            if let Some(axis) = zip_axis(k, v, &mut seen, problems) {
                axes.push(axis);
            }
        } else if let Some(p) = param(k, v, "sweep", &mut seen, problems) {
            axes.push(Axis::Grid(p));
        }
    }
    axes
}

/// `zip:`: parameters whose i-th values go together; a list of one value goes with
/// every i.
fn zip_axis(
    key: &Key,
    node: &Node,
    seen: &mut BTreeSet<String>,
    problems: &mut Vec<Problem>,
) -> Option<Axis> {
    let Value::Map(entries) = &node.value else {
        problems.push(
            problem(
                "srt::recipe::sweep",
                node.span,
                format!(
                    "`sweep.zip` must be a mapping of parameters to lists of values, not {}",
                    node.value.kind()
                ),
            )
            .label("not a mapping")
            .help(
                "write `zip: {tp: [1, 2], dp: [2, 1]}`: the i-th values of every list go together",
            ),
        );
        return None;
    };
    if entries.is_empty() {
        problems.push(
            problem(
                "srt::recipe::sweep",
                key.span,
                "`sweep.zip` has no parameter",
            )
            .label("empty zip")
            .help("give the parameters that vary together, or remove `zip`"),
        );
        return None;
    }
    let params: Vec<Param> = entries
        .iter()
        .filter_map(|(k, v)| param(k, v, "sweep.zip", seen, problems))
        .collect();
    let len = params.iter().map(|p| p.values.len()).max().unwrap_or(0);
    let mut ok = true;
    for p in params
        .iter()
        .filter(|p| p.values.len() != 1 && p.values.len() != len)
    {
        ok = false;
        let longest = params
            .iter()
            .find(|q| q.values.len() == len)
            .map_or("", |q| q.name.as_str());
        problems.push(
            problem(
                "srt::recipe::sweep_zip",
                p.span,
                format!("`sweep.zip.{}` has {} values, `{longest}` has {len}", p.name, p.values.len()),
            )
            .label("not as long as the others")
            .help("zipped parameters go together value by value: give each the same number of values, or one value for all"),
        );
    }
    (ok && params.len() == entries.len()).then_some(Axis::Zip { len, params })
}

/// One parameter and its values.
fn param(
    key: &Key,
    node: &Node,
    path: &str,
    seen: &mut BTreeSet<String>,
    problems: &mut Vec<Problem>,
) -> Option<Param> {
    let name = &key.name;
    if !valid_param(name) {
        problems.push(
            problem(
                "srt::recipe::sweep",
                key.span,
                format!("`{path}.{name}` is not a parameter name a placeholder can name"),
            )
            .label("invalid parameter name")
            .help("use letters, digits and `_`, starting with a letter or `_` (as in `{tp}`)"),
        );
        return None;
    }
    if !seen.insert(name.clone()) {
        problems.push(
            problem(
                "srt::recipe::sweep",
                key.span,
                format!("sweep parameter `{name}` is given twice"),
            )
            .label("second occurrence")
            .help("a parameter is swept once: in the grid or in `zip`, not both"),
        );
        return None;
    }
    let Value::Seq(values) = &node.value else {
        problems.push(
            problem(
                "srt::recipe::sweep",
                node.span,
                format!(
                    "`{path}.{name}` must be a list of values, not {}",
                    node.value.kind()
                ),
            )
            .label("not a list")
            .help(format!(
                "write `{name}: [..]`; a single value is `{name}: [value]`"
            )),
        );
        return None;
    };
    if values.is_empty() {
        problems.push(
            problem("srt::recipe::sweep_empty", node.span, format!("`{path}.{name}` has no value"))
                .label("empty list")
                .help("a sweep with an empty list has no point: give at least one value, or remove the parameter"),
        );
        return None;
    }
    Some(Param {
        name: name.clone(),
        span: key.span,
        values: values.clone(),
    })
}

fn valid_param(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Every parameter the block names, well-formed or not: a placeholder naming one whose
/// values were refused is not unknown too.
fn declared(block: &Node) -> BTreeSet<String> {
    let Value::Map(entries) = &block.value else {
        return BTreeSet::new();
    };
    let mut names = BTreeSet::new();
    for (k, v) in entries {
        match (&v.value, k.name == ZIP) {
            (Value::Map(zipped), true) => names.extend(zipped.iter().map(|(k, _)| k.name.clone())),
            _ => {
                names.insert(k.name.clone());
            }
        }
    }
    names
}

/// The recipe without its `sweep` entry.
fn without_sweep(root: &Node) -> Node {
    let Value::Map(entries) = &root.value else {
        return root.clone();
    };
    Node {
        span: root.span,
        value: Value::Map(
            entries
                .iter()
                .filter(|(k, _)| k.name != "sweep")
                .cloned()
                .collect(),
        ),
    }
}

/// How many points, refused above [`MAX_POINTS`] or [`MAX_EXPANDED_NODES`].
fn point_count(key: &Key, axes: &[Axis], template: &Node, problems: &mut Vec<Problem>) -> usize {
    let count = axes
        .iter()
        .try_fold(1usize, |acc, a| acc.checked_mul(a.len()));
    let nodes = count.and_then(|c| c.checked_mul(node_count(template)));
    match (count, nodes) {
        (Some(c), Some(n)) if c <= MAX_POINTS && n <= MAX_EXPANDED_NODES => c,
        _ => {
            let shown = count.map_or("more than 2^64".to_string(), |c| c.to_string());
            problems.push(
                problem("srt::recipe::sweep_size", key.span, format!("the sweep has {shown} points, more than srt runs in one sweep"))
                    .label("too many points")
                    .help(format!("a sweep may have at most {MAX_POINTS} points (and {MAX_EXPANDED_NODES} YAML values over all of them); split it into several recipes, or zip parameters that go together (`sweep.zip`)")),
            );
            0
        }
    }
}

/// Two points with the same values: the second would only run the first again (and
/// the points are told apart by their names, which are their values).
fn repeated(key: &Key, axes: &[Axis], len: usize) -> Option<Problem> {
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for i in 0..len {
        let values = pick(axes, i);
        let suffix = values
            .iter()
            .map(|(p, v)| format!("{}{}", p.name, py_str(&v.value)))
            .collect::<Vec<_>>()
            .join("_");
        if let Some(first) = seen.insert(suffix.clone(), i) {
            return Some(
                problem("srt::recipe::sweep_repeated", key.span, format!("points {} and {} of the sweep are the same (`{suffix}`)", first + 1, i + 1))
                    .label("a point repeated")
                    .help("a value given twice in a list (or a zipped tuple twice) runs the same point twice: remove the repetition"),
            );
        }
    }
    None
}

fn node_count(node: &Node) -> usize {
    1 + match &node.value {
        Value::Seq(items) => items.iter().map(node_count).sum(),
        Value::Map(entries) => entries.iter().map(|(_, v)| node_count(v)).sum(),
        _ => 0,
    }
}

/// The values of point `i`: the last axis varies fastest.
fn pick(axes: &[Axis], mut i: usize) -> Vec<(&Param, &Node)> {
    let mut chosen = vec![0; axes.len()];
    for (slot, axis) in chosen.iter_mut().zip(axes).rev() {
        *slot = i % axis.len();
        i /= axis.len();
    }
    axes.iter()
        .zip(chosen)
        .flat_map(|(axis, at)| {
            axis.params()
                .map(move |p| (p, &p.values[if p.values.len() == 1 { 0 } else { at }]))
        })
        .collect()
}

/// A `{name}` in a string: its byte range and the name.
fn placeholders(s: &str) -> impl Iterator<Item = (usize, usize, &str)> {
    let bytes = s.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while let Some(open) = s[at..].find('{').map(|o| o + at) {
            let name_end = s[open + 1..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(s.len(), |e| e + open + 1);
            at = open + 1;
            if name_end > open + 1 && bytes.get(name_end) == Some(&b'}') {
                let name = &s[open + 1..name_end];
                if valid_param(name) {
                    at = name_end + 1;
                    return Some((open, name_end + 1, name));
                }
            }
        }
        None
    })
}

/// Every placeholder names a parameter, every parameter is used, no placeholder is
/// where it would not be replaced or where a value cannot go.
fn check_template(
    template: &Node,
    params: &[&Param],
    declared: &BTreeSet<String>,
    problems: &mut Vec<Problem>,
) {
    let mut used = BTreeSet::new();
    let mut walk = Walk {
        params,
        declared,
        used: &mut used,
        problems,
    };
    walk.node(template, "");
    for p in params.iter().filter(|p| !used.contains(p.name.as_str())) {
        let repeats = match p.values.len() {
            1 => String::new(),
            n => format!(": the sweep runs each of its other points {n} times, once per value"),
        };
        problems.push(
            Problem::warning("srt::recipe::sweep_unused", p.span, format!("sweep parameter `{}` is used nowhere in the recipe{repeats}", p.name))
                .label("no `{".to_string() + &p.name + "}` in the recipe")
                .help(format!("write `\"{{{}}}\"` where its value goes (quoted: unquoted, `{{{}}}` is a YAML mapping), or remove the parameter (srtctl ignores it too)", p.name, p.name)),
        );
    }
}

struct Walk<'a> {
    params: &'a [&'a Param],
    declared: &'a BTreeSet<String>,
    used: &'a mut BTreeSet<String>,
    problems: &'a mut Vec<Problem>,
}

impl<'a> Walk<'a> {
    fn param(&self, name: &str) -> Option<&'a Param> {
        self.params.iter().copied().find(|p| p.name == name)
    }

    fn node(&mut self, node: &Node, path: &str) {
        match &node.value {
            Value::Str(s) => self.string(node, s, path),
            Value::Seq(items) => items.iter().for_each(|n| self.node(n, path)),
            Value::Map(entries) => {
                if self.unquoted(node, entries) {
                    return;
                }
                for (k, v) in entries {
                    self.key(k);
                    let path = match path.is_empty() {
                        true => k.name.clone(),
                        false => format!("{path}.{}", k.name),
                    };
                    self.node(v, &path);
                }
            }
            _ => {}
        }
    }

    /// `{ conc }` unquoted: YAML reads a flow mapping `{conc: null}`.
    fn unquoted(&mut self, node: &Node, entries: &[(Key, Node)]) -> bool {
        let [(k, v)] = entries else { return false };
        if v.value != Value::Null || !self.declared.contains(&k.name) {
            return false;
        }
        self.used.insert(k.name.clone());
        self.problems.push(
            problem("srt::recipe::sweep_unquoted", node.span, format!("`{{{}}}` unquoted is a YAML mapping, not the sweep parameter `{}`", k.name, k.name))
                .label("a mapping `{".to_string() + &k.name + ": null}`")
                .help(format!("quote it: `\"{{{}}}\"` (a string that is only the placeholder takes the value's type)", k.name)),
        );
        true
    }

    fn key(&mut self, key: &Key) {
        if let Some((_, _, name)) =
            placeholders(&key.name).find(|(_, _, n)| self.declared.contains(*n))
        {
            let name = name.to_string();
            self.used.insert(name.clone());
            self.problems.push(
                problem(
                    "srt::recipe::sweep_name",
                    key.span,
                    format!("`{{{name}}}` is in a key, where sweeps put no value"),
                )
                .label("placeholder in a key")
                .help("keys are left as written (as srtctl does): put the placeholder in a value"),
            );
        }
    }

    fn string(&mut self, node: &Node, s: &str, path: &str) {
        let whole = s.starts_with('{')
            && placeholders(s)
                .next()
                .is_some_and(|(a, b, _)| a == 0 && b == s.len());
        for (start, _, name) in placeholders(s) {
            self.used.insert(name.to_string());
            let Some(p) = self.param(name) else {
                let shell = start > 0 && s.as_bytes()[start - 1] == b'$';
                if !shell && !self.declared.contains(name) {
                    self.unknown(node, name);
                }
                continue;
            };
            if path == "name" {
                self.problems.push(
                    problem("srt::recipe::sweep_name", node.span, format!("the deployment name holds sweep parameter `{name}`"))
                        .label("changes per point")
                        .help("a sweep runs every point in one deployment, so its name stays the same: remove the placeholder (each point's results are named after it)"),
                );
            } else if !whole && p.values.iter().any(|v| matches!(v.value, Value::Map(_))) {
                self.problems.push(
                    problem("srt::recipe::sweep_placeholder", node.span, format!("`{{{name}}}` is inside a string, and a value of `{name}` is a mapping"))
                        .label("a mapping cannot go inside a string")
                        .help(format!("make the string exactly `\"{{{name}}}\"` to put the mapping there, or sweep strings")),
                );
            }
        }
    }

    fn unknown(&mut self, node: &Node, name: &str) {
        let names: Vec<&str> = self.params.iter().map(|p| p.name.as_str()).collect();
        let close = did_you_mean(name, names.iter().copied());
        if let Some(close) = close {
            // The typo is the problem; the parameter it misspells is not unused too.
            self.used.insert(close.to_string());
        }
        let help = match close {
            Some(close) => format!(
                "did you mean `{{{close}}}`? the sweep's parameters are {}",
                list(&names)
            ),
            None => format!(
                "the sweep's parameters are {}; write `${{{name}}}` for a shell variable",
                list(&names)
            ),
        };
        self.problems.push(
            problem(
                "srt::recipe::sweep_placeholder",
                node.span,
                format!("`{{{name}}}` names no sweep parameter"),
            )
            .label("unknown placeholder")
            .help(help),
        );
    }
}

fn list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `template` with the point's values put in.
fn substitute(template: &Node, values: &[(&Param, &Node)]) -> Node {
    let value = match &template.value {
        Value::Str(s) => return substitute_str(template, s, values),
        Value::Seq(items) => Value::Seq(items.iter().map(|n| substitute(n, values)).collect()),
        Value::Map(entries) => Value::Map(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), substitute(v, values)))
                .collect(),
        ),
        other => other.clone(),
    };
    Node {
        span: template.span,
        value,
    }
}

fn substitute_str(node: &Node, s: &str, values: &[(&Param, &Node)]) -> Node {
    let find = |name: &str| values.iter().find(|(p, _)| p.name == name).map(|(_, v)| *v);
    if let Some((0, end, name)) = placeholders(s).next() {
        if end == s.len() {
            if let Some(v) = find(name) {
                return Node {
                    span: node.span,
                    value: v.value.clone(),
                };
            }
        }
    }
    let mut out = String::with_capacity(s.len());
    let mut at = 0;
    for (start, end, name) in placeholders(s) {
        if let Some(v) = find(name) {
            out.push_str(&s[at..start]);
            out.push_str(&embedded(&v.value));
            at = end;
        }
    }
    out.push_str(&s[at..]);
    Node {
        span: node.span,
        value: Value::Str(out),
    }
}

/// A value inside a longer string, as srtctl writes it: `str(value)`, a list as its
/// items joined by commas.
fn embedded(value: &Value) -> String {
    match value {
        Value::Seq(items) => items
            .iter()
            .map(|n| py_str(&n.value))
            .collect::<Vec<_>>()
            .join(","),
        other => py_str(other),
    }
}

/// Python's `str()` of the value srtctl would hold.
pub fn py_str(value: &Value) -> String {
    match value {
        Value::Str(s) => s.clone(),
        other => py_repr(other),
    }
}

/// Python's `repr()` of the value srtctl would hold.
fn py_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => py_float(*f),
        Value::Str(s) => format!("'{s}'"),
        Value::Seq(items) => format!(
            "[{}]",
            items
                .iter()
                .map(|n| py_repr(&n.value))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Map(entries) => format!(
            "{{{}}}",
            entries
                .iter()
                .map(|(k, v)| format!("'{}': {}", k.name, py_repr(&v.value)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A float as Python writes it: `1.0`, `0.85`, `1e-07`, `1.5e+16`, `inf`.
fn py_float(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    let a = f.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        let e = format!("{f:e}");
        let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    if f.fract() == 0.0 {
        return format!("{f:.1}");
    }
    f.to_string()
}

#[cfg(test)]
mod tests;
