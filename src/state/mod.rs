//! The recorded state of a deployment: its file format, its atomic store, and the
//! deployment lock.

mod format;

pub use format::{ResourceState, Runtime, State, Status, FORMAT_VERSION};
