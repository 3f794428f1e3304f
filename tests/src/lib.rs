//! The end-to-end harness: starts real servers on loopback ports it picks, owns them, stops them.

pub mod process;
pub mod redis;
pub mod resp;
