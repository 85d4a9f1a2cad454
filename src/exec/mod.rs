//! Executors: the machinery that turns an applied plan into running processes.
//!
//! Executors live here. The embedded default executor runs everything on this machine
//! and is built on the local process primitives in [`process`] (detached spawn,
//! identity with pid-reuse detection, process-group termination, port and log helpers).

pub mod process;
