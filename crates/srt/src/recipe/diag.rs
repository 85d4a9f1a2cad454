//! Recipe diagnostics: every problem found in a recipe points at its key or value.

use miette::{Diagnostic, LabeledSpan, NamedSource, Severity, SourceSpan};
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
    /// A secret value the problem is about (a flag that would carry it), masked
    /// wherever the recipe is shown. (Boxed: it is rare, and a problem travels in
    /// `Result`s.)
    pub secret: Option<Box<SourceSpan>>,
    /// [`Severity::Error`] (the recipe is refused) or [`Severity::Warning`] (srt goes
    /// on, and says what the recipe probably does not mean).
    pub severity: Severity,
    /// Set on an error that says the parallel sizes do not fit the GPUs a worker gets
    /// (an engine's shape check): the recipe is well formed, only this shape cannot
    /// run. A sweep skips such points ([`crate::assemble::load_fitting`]).
    pub misfit: bool,
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
            secret: None,
            severity: Severity::Error,
            misfit: false,
        }
    }

    /// A warning at `span`: srt goes on, and shows it (located, like an error) wherever
    /// the recipe is validated, rendered or planned.
    pub fn warning(code: &'static str, span: SourceSpan, message: impl Into<String>) -> Self {
        Problem {
            severity: Severity::Warning,
            ..Problem::new(code, span, message)
        }
    }

    /// Whether this is a warning rather than an error.
    pub fn is_warning(&self) -> bool {
        self.severity == Severity::Warning
    }

    /// Mark the problem as a misfit of parallel sizes and GPUs ([`Problem::misfit`]).
    pub fn misfit(mut self) -> Self {
        self.misfit = true;
        self
    }

    /// Whether the problem is an error of misfit only: see [`Problem::misfit`].
    pub fn is_misfit(&self) -> bool {
        self.misfit && !self.is_warning()
    }

    /// Mark the text at `span` as a secret, masked wherever the recipe is shown.
    pub fn secret(mut self, span: SourceSpan) -> Self {
        self.secret = Some(Box::new(span));
        self
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
    fn severity(&self) -> Option<Severity> {
        Some(self.severity)
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
        many if many.iter().all(Problem::is_warning) => {
            format!("{} warnings about the recipe", many.len())
        }
        many => format!("{} problems in recipe", many.len()),
    }
}

impl Diagnostic for RecipeError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        match self.problems.as_slice() {
            [one] => Some(Box::new(one.code)),
            many if many.iter().all(Problem::is_warning) => Some(Box::new("srt::recipe::warnings")),
            _ => Some(Box::new("srt::recipe::invalid")),
        }
    }
    fn severity(&self) -> Option<Severity> {
        match self.problems.iter().all(Problem::is_warning) {
            true => Some(Severity::Warning),
            false => Some(Severity::Error),
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
