//! Recipes: the YAML a user writes, loaded with spans and validated.
//!
//! - [`yaml`]: YAML text to a spanned node tree.
//! - [`load`]: node tree to the typed [`model::Recipe`], every problem spanned.
//! - [`validate`]: cross-field rules that need the whole recipe.
//! - [`diag`]: the diagnostics types.
//! - [`limits`]: the largest deployment a recipe may ask for.
pub mod diag;
pub mod keys;
pub mod limits;
pub mod load;
mod model;
pub mod runtime;
pub mod yaml;

pub use diag::{Problem, RecipeError};
pub use load::{load_file, load_problems, load_str, Source};
pub use model::*;
