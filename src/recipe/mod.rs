//! Recipes: the YAML a user writes, loaded with spans and validated.
//!
//! - [`yaml`]: YAML text to a spanned node tree.
//! - [`load`]: node tree to the typed [`schema::Recipe`], every problem spanned.
//! - [`validate`]: cross-field rules that need the whole recipe.
//! - [`diag`]: the diagnostics types.
pub mod diag;
pub mod keys;
pub mod load;
pub mod schema;
pub mod yaml;

pub use diag::{Problem, RecipeError};
pub use load::{load_file, load_str, Source};
pub use schema::*;
