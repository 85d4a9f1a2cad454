//! Recipes: the YAML a user writes, loaded with spans and validated.
//!
//! - [`yaml`]: YAML text to a spanned node tree.
//! - [`load`]: node tree to the typed [`model::Recipe`], every problem spanned.
//! - [`validate`]: cross-field rules that need the whole recipe.
//! - [`diag`]: the diagnostics types.
//! - [`limits`]: the largest deployment a recipe may ask for.
//! - [`srtctl`]: srtctl's files (override files, the v1 layout) turned into the one
//!   recipe the loader reads.
//! - [`sweep`]: a `sweep:` block expanded into its points.
pub mod diag;
pub mod keys;
pub mod limits;
pub mod load;
mod model;
pub mod runtime;
pub mod srtctl;
pub mod sweep;
pub mod yaml;

pub use diag::{Problem, RecipeError};
pub use load::{load_file, load_file_selected, load_problems, load_selected, load_str, Source};
pub use model::*;
pub use srtctl::Selection;
