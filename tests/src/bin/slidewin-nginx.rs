//! Renders an `nginx/` template into a prefix and runs nginx on it in the foreground (the
//! process becomes nginx). Used by `make demo` and `scripts/bench-nginx.sh`.
//!
//! usage: slidewin-nginx CONFIG [--port N] [--workers N] [--prefix DIR]

use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use slidewin_tests::nginx::{repo_root, Prefix};

fn main() {
    let mut args = std::env::args().skip(1);
    let config = args.next().unwrap_or_else(|| usage("CONFIG is missing"));
    let (mut port, mut workers, mut dir) = (8080u16, 2u32, None);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--port" => {
                port = value
                    .parse()
                    .unwrap_or_else(|_| usage("--port takes a number"))
            }
            "--workers" => {
                workers = value
                    .parse()
                    .unwrap_or_else(|_| usage("--workers takes a number"))
            }
            "--prefix" => dir = Some(PathBuf::from(value)),
            _ => usage(&format!("unknown option {flag}")),
        }
    }
    let stem = config.trim_end_matches(".conf");
    let dir = dir.unwrap_or_else(|| repo_root().join("target").join(format!("nginx-{stem}")));
    let prefix = Prefix::at(&dir, port, workers);
    eprintln!(
        "slidewin-nginx: {config} on http://127.0.0.1:{port}/ ({workers} workers, prefix {})",
        dir.display()
    );
    let err = prefix.command(&config).exec();
    eprintln!("slidewin-nginx: cannot run nginx: {err}");
    std::process::exit(1);
}

fn usage(problem: &str) -> ! {
    eprintln!("slidewin-nginx: {problem}\nusage: slidewin-nginx CONFIG [--port N] [--workers N] [--prefix DIR]");
    std::process::exit(2);
}
