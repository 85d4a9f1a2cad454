//! `srt`: plan and apply LLM-serving deployments.
//!
//! A recipe (YAML) is loaded and validated ([`recipe`]), lowered into a topology of
//! endpoints and processes, rendered into a launch plan with every command line, then
//! turned into a resource graph that is diffed against recorded state and applied.
//! See `docs/architecture.md` for the module map and data flow.
pub mod sim;
