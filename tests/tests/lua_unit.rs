//! The LuaJIT-level unit tests (tests/lua/unit.lua): the module and resty.slidewin without nginx.

use std::process::Command;

use slidewin_tests::nginx::{lua_module, repo_root};

#[test]
fn lua_unit_tests_pass_under_luajit() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(lua_module(), dir.path().join("slidewin.so")).expect("copy module");
    let root = repo_root();
    let out = Command::new("luajit")
        .arg(root.join("tests/lua/unit.lua"))
        .env(
            "LUA_PATH",
            format!("{0}/lua/?.lua;{0}/tests/lua/?.lua;;", root.display()),
        )
        .env("LUA_CPATH", format!("{}/?.so;;", dir.path().display()))
        .output()
        .expect("run luajit (scripts/deps.sh nginx installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "luajit unit tests failed");
    assert!(stdout.contains(" passed, 0 failed"), "no summary line");
}
