//! The end-to-end harness: starts real servers on loopback ports it picks, owns them, stops them.

pub mod bench;
pub mod delay;
pub mod http;
pub mod llm_upstream;
pub mod load;
pub mod metrics;
pub mod nginx;
pub mod nginx_binary;
pub mod openloop;
pub mod process;
pub mod random;
pub mod redis;
pub mod resp;
pub mod tls;
