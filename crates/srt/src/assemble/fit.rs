//! Which point of a sweep the commands that read one recipe read: the first whose
//! parallel sizes fit the GPUs its workers get. srtctl's grid sweeps over `tp`, `pp`,
//! `dp` and `ep` on fixed nodes, so some of their points cannot run (TP16 on a node of
//! eight GPUs, or, for TensorRT-LLM, whose MPI job is one rank per GPU, TP1 there);
//! where an engine runs a point on fewer GPUs than its worker's it fits, with a warning
//! (`srt::recipe::idle_gpus`). An engine's shape check marks the others
//! ([`Problem::misfit`]), and such a point is skipped, said in the point's note
//! ([`crate::recipe::sweep::read_as`]). Any other problem stops the search at its point.

use super::{assemble, BuildOptions};
use crate::recipe::{self, Problem, Recipe, RecipeError, Selection, Source, Unfit};

/// The recipe of `source` that `selection` picks, as `validate`, `render`, `plan` and
/// `apply` read it: for a sweep, its first point that fits, with the points skipped
/// before it recorded ([`crate::recipe::SweepPoint::unfit`]); the first point, so
/// recorded, when none fits. `prepare` is what the caller does to a recipe before it
/// is assembled (the cluster profile's aliases).
pub fn load_fitting(
    source: &Source,
    default_name: &str,
    selection: &Selection,
    options: &BuildOptions,
    prepare: impl Fn(&mut Recipe),
) -> Result<Recipe, RecipeError> {
    let mut first = recipe::load_selected(source, default_name, selection)?;
    prepare(&mut first);
    let Some(point) = &first.sweep else {
        return Ok(first);
    };
    let Some(first_misfit) = misfit(&first, options) else {
        return Ok(first);
    };
    let mut unfit = Unfit {
        count: 1,
        first: point.params.clone(),
        reason: first_misfit.reason(),
    };
    for index in 1..point.of {
        let mut next = recipe::load::load_point(source, default_name, selection, index)
            .map_err(|p| source.error(p))?;
        prepare(&mut next);
        if misfit(&next, options).is_none() {
            return Ok(with_unfit(next, unfit));
        }
        unfit.count += 1;
    }
    Ok(with_unfit(first, unfit))
}

fn with_unfit(mut recipe: Recipe, unfit: Unfit) -> Recipe {
    if let Some(point) = recipe.sweep.as_mut() {
        point.unfit = Some(unfit);
    }
    recipe
}

/// The problems of a recipe whose every error is a misfit: its shape cannot run on the
/// GPUs its workers get, and nothing else is wrong with it.
#[derive(Debug)]
pub struct Misfit(pub Vec<Problem>);

impl Misfit {
    /// Why it does not fit: its first error's message.
    pub fn reason(&self) -> String {
        self.0
            .iter()
            .find(|p| !p.is_warning())
            .map(|p| p.message.clone())
            .unwrap_or_default()
    }
}

/// `recipe`'s assembly problems when every error among them is a misfit; `None` when
/// it has none, or another. (The shapes are checked as each worker is built, so this
/// builds the launch plan.)
pub fn misfit(recipe: &Recipe, options: &BuildOptions) -> Option<Misfit> {
    let problems = assemble(recipe, options).err()?;
    is_misfit(&problems).then_some(Misfit(problems))
}

/// Whether `problems` hold an error, and only misfits among their errors.
fn is_misfit(problems: &[Problem]) -> bool {
    let mut errors = problems.iter().filter(|p| !p.is_warning()).peekable();
    errors.peek().is_some() && errors.all(Problem::is_misfit)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A vLLM aggregate worker of 4 GPUs, its tensor-parallel size swept (`tp`), with
    /// `extra` added to its args.
    fn swept(tps: &str, extra: &str) -> Source {
        Source {
            name: "s.yaml".into(),
            text: format!(
                "schema: 2\nname: s\nmodel: {{path: /models/m}}\nresources: {{gpus_per_node: 4}}\n\
                 frontend: {{type: vllm-router}}\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n    gpus: 4\n    \
                 args:\n      tensor-parallel-size: \"{{tp}}\"\n{extra}sweep:\n  tp: {tps}\n"
            ),
        }
    }

    fn load(source: &Source) -> Result<Recipe, RecipeError> {
        load_fitting(
            source,
            "s",
            &Selection::default(),
            &BuildOptions::default(),
            |_| (),
        )
    }

    #[test]
    fn the_first_point_that_fits_is_read_and_the_skipped_ones_are_said() {
        let recipe = load(&swept("[8, 16, 4, 2]", "")).unwrap();
        let point = recipe.sweep.clone().unwrap();
        assert_eq!((point.index, point.params.as_str()), (2, "tp=4"));
        let unfit = point.unfit.clone().unwrap();
        assert_eq!((unfit.count, unfit.first.as_str()), (2, "tp=8"));
        assert!(unfit.reason.contains("does not fit"), "{unfit:?}");
        let note = crate::recipe::sweep::read_as(&point).message;
        assert!(
            note.contains("point 3 of 4 (tp=4), the first whose parallel sizes fit its GPUs: 2 before it do not (tp=8: "),
            "{note}"
        );
        assert!(assemble(&recipe, &BuildOptions::default()).is_ok());
    }

    #[test]
    fn a_sweep_whose_first_point_fits_is_read_as_before() {
        let recipe = load(&swept("[4, 1]", "")).unwrap();
        let point = recipe.sweep.unwrap();
        assert_eq!((point.index, point.unfit), (0, None));
    }

    /// Fewer GPUs than the worker's on one node run, as srtctl runs them: a point that
    /// leaves GPUs idle is read, with a warning, not skipped.
    #[test]
    fn a_point_that_leaves_gpus_idle_fits() {
        let recipe = load(&swept("[1, 4]", "")).unwrap();
        let point = recipe.sweep.clone().unwrap();
        assert_eq!((point.index, point.unfit.is_none()), (0, true));
        let plan = assemble(&recipe, &BuildOptions::default()).unwrap();
        let idle: Vec<&str> = plan
            .warnings
            .iter()
            .filter(|w| w.code == "srt::recipe::idle_gpus")
            .map(|w| w.message.as_str())
            .collect();
        assert_eq!(
            idle,
            ["each `agg` worker is given 4 GPUs but its parallel sizes use 1: `vllm` runs on the first 1, leaving 3 GPUs idle, as under srtctl"]
        );
    }

    #[test]
    fn when_no_point_fits_the_first_is_read_and_its_errors_say_none_does() {
        let recipe = load(&swept("[8, 16]", "")).unwrap();
        let point = recipe.sweep.clone().unwrap();
        assert_eq!(point.index, 0);
        assert_eq!(point.unfit.as_ref().map(|u| u.count), Some(2));
        let problems = assemble(&recipe, &BuildOptions::default()).unwrap_err();
        assert!(is_misfit(&problems), "{problems:?}");
        let note = crate::recipe::sweep::read_as(&point).message;
        assert!(
            note.contains("no point's parallel sizes fit its GPUs"),
            "{note}"
        );
    }

    /// Only a misfit is skipped: a point with another error stops the search there,
    /// and that error is the caller's to report.
    #[test]
    fn another_error_is_not_skipped() {
        let source = swept("[8, 4]", "      max-num-seqz: 8\n");
        let recipe = load(&source).unwrap();
        assert_eq!(recipe.sweep.as_ref().map(|p| p.index), Some(0));
        let problems = assemble(&recipe, &BuildOptions::default()).unwrap_err();
        assert!(!is_misfit(&problems), "{problems:?}");
    }

    #[test]
    fn a_recipe_without_a_sweep_is_read_as_it_is() {
        let source = Source {
            name: "r.yaml".into(),
            text: "schema: 2\nname: r\nmodel: {path: /models/m}\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n    gpus: 2\n    args: {tensor-parallel-size: 4}\n".into(),
        };
        let recipe = load(&source).unwrap();
        assert!(recipe.sweep.is_none());
        let problems = assemble(&recipe, &BuildOptions::default()).unwrap_err();
        assert!(problems.iter().any(Problem::is_misfit), "{problems:?}");
    }
}
