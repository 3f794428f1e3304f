//! The LuaJIT-level unit tests (tests/lua/unit/): the module and resty.slidewin without nginx,
//! one file per subject and one test here per file, so a failure names its subject. Each file
//! requires tests/lua/unit/harness.lua and ends with its "N passed, M failed" line.

use std::process::Command;

use slidewin_tests::nginx::{lua_module, repo_root};

/// The files of tests/lua/unit/ that the subjects require, not subjects themselves.
const HELPERS: &[&str] = &["harness.lua", "fake_nginx.lua"];

/// Runs tests/lua/unit/`subject`.lua under luajit: it must exit 0 and its last line must be
/// "N passed, 0 failed" with N at least 1.
fn run(subject: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(lua_module(), dir.path().join("slidewin.so")).expect("copy module");
    let root = repo_root();
    let file = format!("tests/lua/unit/{subject}.lua");
    let out = Command::new("luajit")
        .arg(root.join(&file))
        .env(
            "LUA_PATH",
            format!("{0}/lua/?.lua;{0}/tests/lua/?.lua;;", root.display()),
        )
        .env("LUA_CPATH", format!("{}/?.so;;", dir.path().display()))
        .output()
        .expect("run luajit (scripts/deps.sh nginx installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{file}: luajit unit tests failed");
    let passed: u32 = stdout
        .lines()
        .last()
        .and_then(|line| line.strip_suffix(" passed, 0 failed"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{file}: no \"N passed, 0 failed\" summary line"));
    assert!(passed > 0, "{file}: no test ran");
}

/// One test per subject file, named as the file, and the list of them (`SUBJECTS`).
macro_rules! subjects {
    ($($subject:ident),* $(,)?) => {
        const SUBJECTS: &[&str] = &[$(stringify!($subject)),*];
        $(
            #[test]
            fn $subject() {
                run(stringify!($subject));
            }
        )*
    };
}

subjects!(
    cdefs,
    config,
    formulas,
    guard,
    headers,
    journal,
    json,
    limiter,
    phases,
    prometheus,
    registry,
    rules,
    shdict_store,
    shm_store,
    stream,
    switches,
);

/// A file added to tests/lua/unit/ without its line in `subjects!` would never run.
#[test]
fn every_subject_file_is_run() {
    let dir = repo_root().join("tests/lua/unit");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.expect("read a directory entry").file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".lua") && !HELPERS.contains(&name.as_str()))
        .collect();
    files.sort();
    let mut listed: Vec<String> = SUBJECTS.iter().map(|s| format!("{s}.lua")).collect();
    listed.sort();
    assert_eq!(
        files, listed,
        "tests/lua/unit/ and the subjects! list of tests/tests/lua_unit.rs differ"
    );
}
