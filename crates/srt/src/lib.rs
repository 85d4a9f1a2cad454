//! `srt`: plan and apply LLM-serving deployments.
//!
//! A recipe (YAML) is loaded and validated ([`recipe`]), lowered into a topology of
//! endpoints and processes, rendered into a launch plan with every command line, then
//! turned into a resource graph that is diffed against recorded state and applied.
//! See `docs/architecture.md` for the module map and data flow.

pub mod apply;
pub mod assemble;
pub mod bench;
pub mod catalog;
pub mod cluster;
pub mod engine;
pub mod exec;
pub mod exit;
pub mod files;
pub mod frontend;
pub mod getopt;
pub mod graph;
pub mod input;
pub mod launch;
mod parallel;
pub mod plan;
pub mod ports;
pub mod probe;
pub mod recipe;
pub mod schema;
pub mod secrets;
pub mod state;
pub mod sweep;
pub mod term;
pub mod topology;
pub mod workflow;
