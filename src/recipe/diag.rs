//! Recipe diagnostics: every problem found in a recipe points at its key or value.

use miette::{Diagnostic, LabeledSpan, NamedSource, SourceSpan};
use std::fmt;

/// One problem in a recipe, with the span it concerns.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// Stable code, e.g. `srt::recipe::unknown_key`.
    pub code: &'static str,
    /// One-line message.
    pub message: String,
    /// Where in the recipe (byte span).
    pub span: SourceSpan,
    /// Text under the caret.
    pub label: String,
    /// How to fix it.
    pub help: Option<String>,
}

impl Problem {
    /// A problem at `span` with the given code and message.
    pub fn new(code: &'static str, span: SourceSpan, message: impl Into<String>) -> Self {
        let message = message.into();
        Problem {
            code,
            label: "here".into(),
            message,
            span,
            help: None,
        }
    }

    /// Set the label shown under the span.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// Set the help text.
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Problem {}

impl Diagnostic for Problem {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.code))
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(std::iter::once(
            LabeledSpan::new_primary_with_span(Some(self.label.clone()), self.span),
        )))
    }
}

/// All problems found in one recipe file, rendered against its source.
#[derive(Debug, thiserror::Error)]
#[error("{}", headline(.problems))]
pub struct RecipeError {
    /// The recipe text and file name.
    pub source_code: NamedSource<String>,
    /// Every problem found, in source order.
    pub problems: Vec<Problem>,
}

fn headline(problems: &[Problem]) -> String {
    match problems {
        [one] => one.message.clone(),
        many => format!("{} problems in recipe", many.len()),
    }
}

impl Diagnostic for RecipeError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        match self.problems.as_slice() {
            [one] => Some(Box::new(one.code)),
            _ => Some(Box::new("srt::recipe::invalid")),
        }
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        match self.problems.as_slice() {
            [one] => one.help(),
            _ => None,
        }
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.source_code)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        match self.problems.as_slice() {
            [one] => one.labels(),
            _ => None,
        }
    }
    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        match self.problems.as_slice() {
            [_] => None,
            many => Some(Box::new(many.iter().map(|p| p as &dyn Diagnostic))),
        }
    }
}

/// Collects problems while a recipe is checked, so all of them are reported at once.
#[derive(Default, Debug)]
pub struct Problems(pub Vec<Problem>);

impl Problems {
    /// Record a problem.
    pub fn push(&mut self, problem: Problem) {
        self.0.push(problem);
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The closest candidate to `word`, if it is close enough to be a likely typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_keys_only() {
        assert_eq!(
            did_you_mean("gpu", ["gpus", "nodes", "workers"]),
            Some("gpus")
        );
        assert_eq!(
            did_you_mean("worker", ["gpus", "nodes", "workers"]),
            Some("workers")
        );
        assert_eq!(did_you_mean("zzz", ["gpus", "nodes", "workers"]), None);
    }
}
