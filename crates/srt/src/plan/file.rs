//! Saved plans (`srt plan -o FILE`, `srt apply FILE`).
//!
//! A plan file holds the plan, the recipe text and the options it was made from. Apply
//! re-lowers the recipe (deterministic), checks it still hashes to the same value, and
//! refuses when the state's lineage or serial moved since the plan was made.

use super::Plan;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Version of the plan file format.
pub const FILE_FORMAT_VERSION: u32 = 1;

/// A saved plan.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlanFile {
    /// File format version.
    pub file_format_version: u32,
    /// The recipe's file name as given.
    pub recipe_name: String,
    /// The recipe text.
    pub recipe_text: String,
    /// Nodes option.
    pub nodes: Option<usize>,
    /// Whether workers run as the simulator.
    pub simulate: bool,
    /// The plan.
    pub plan: Plan,
}

/// Why a saved plan cannot be applied.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum PlanFileError {
    /// Unreadable or malformed.
    #[error("cannot read plan file {path}: {detail}")]
    #[diagnostic(code(srt::plan::file))]
    Read {
        /// Path.
        path: String,
        /// Detail.
        detail: String,
    },
    /// The state changed since the plan was made.
    #[error("stale plan: {detail}")]
    #[diagnostic(
        code(srt::plan::stale),
        help("re-run `srt plan` and apply the new plan")
    )]
    Stale {
        /// What moved.
        detail: String,
    },
}

impl PlanFile {
    /// Write it (mode 0600, atomically).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).expect("plan file serializes");
        crate::files::write_atomic(path, text.as_bytes())
    }

    /// Read it.
    pub fn load(path: &Path) -> Result<PlanFile, PlanFileError> {
        let text = std::fs::read_to_string(path).map_err(|e| PlanFileError::Read {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        let file: PlanFile = serde_json::from_str(&text).map_err(|e| PlanFileError::Read {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        if file.file_format_version != FILE_FORMAT_VERSION {
            return Err(PlanFileError::Read {
                path: path.display().to_string(),
                detail: format!("unsupported plan file format {}", file.file_format_version),
            });
        }
        Ok(file)
    }

    /// Refuse when `lineage`/`serial` or the recipe hash differ from what the plan saw.
    pub fn check_fresh(
        &self,
        lineage: &str,
        serial: u64,
        recipe_hash: &str,
    ) -> Result<(), PlanFileError> {
        if self.plan.lineage != lineage {
            return Err(PlanFileError::Stale {
                detail: format!(
                    "the plan was made for state lineage {}, the deployment's is {lineage}",
                    self.plan.lineage
                ),
            });
        }
        if self.plan.serial != serial {
            return Err(PlanFileError::Stale {
                detail: format!(
                    "the state was changed by another operation after the plan was created (serial {} -> {serial})",
                    self.plan.serial
                ),
            });
        }
        if self.plan.recipe_hash != recipe_hash {
            return Err(PlanFileError::Stale {
                detail: "the recipe no longer lowers to what the plan was made from (different srt version?)".into(),
            });
        }
        Ok(())
    }
}
