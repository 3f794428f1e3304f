//! `luarocks make --tree T` (the top-level rockspec) builds slidewin.so with cargo and
//! installs it with the Lua modules into T, and the demo config served by nginx with only T on
//! its package paths (no copy of the checkout's lua/ or the module in its prefix) limits.

use std::path::Path;
use std::process::Command;

use slidewin_tests::http;
use slidewin_tests::nginx::{
    lua_module, open_to_workers, repo_root, target_dir, Nginx, Packages, Prefix,
};

/// `luarocks make --tree tree` in the checkout, reusing cargo's built target (a rebuild only
/// when the sources changed); panics with luarocks' output when it fails.
fn luarocks_make(tree: &Path) {
    let output = Command::new("luarocks")
        .args(["make", "--tree"])
        .arg(tree)
        .current_dir(repo_root())
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("run luarocks (scripts/deps.sh luarocks)");
    assert!(
        output.status.success(),
        "luarocks make failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn luarocks_tree_alone_serves_the_demo() {
    lua_module(); // built once by the harness, so luarocks' cargo build finds it fresh
    let tree_dir = tempfile::Builder::new()
        .prefix("slidewin-rocks-")
        .tempdir()
        .expect("temp dir");
    let tree = tree_dir.path().to_path_buf();
    luarocks_make(&tree);
    for installed in [
        "lib/lua/5.1/slidewin.so",
        "share/lua/5.1/resty/slidewin.lua",
        "share/lua/5.1/resty/slidewin/registry.lua",
        "share/lua/5.1/redis/rule.lua",
    ] {
        assert!(
            tree.join(installed).is_file(),
            "luarocks did not install {installed}"
        );
    }
    let listed = Command::new("luarocks")
        .args(["list", "--porcelain", "--tree"])
        .arg(&tree)
        .output()
        .expect("luarocks list");
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.starts_with("slidewin\t0.1.0-1\tinstalled"),
        "luarocks list: {listed}"
    );
    open_to_workers(&tree); // nginx's workers (nobody) read the tree

    let prefix = Prefix::temporary_with(2, &Packages::RocksTree(tree.clone()));
    assert!(
        !prefix.dir.join("lua").exists() && !prefix.dir.join("lib").exists(),
        "the prefix holds no copy of the checkout's modules"
    );
    let http_conf = std::fs::read_to_string(prefix.dir.join("conf/include/http.conf")).unwrap();
    let lua_path = format!("lua_package_path \"{}/share/lua/5.1/?.lua;", tree.display());
    assert!(http_conf.contains(&lua_path), "{http_conf}");
    assert!(
        !http_conf.contains(&repo_root().display().to_string()),
        "{http_conf}"
    );

    let nginx = Nginx::start_in(prefix, "demo.conf", &[]);
    let statuses: Vec<u16> = (0..8)
        .map(|_| http::get(nginx.port(), "/api/?user=rocks").status)
        .collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429, 429]);
    let other = http::get(nginx.port(), "/api/?user=other");
    assert_eq!(other.status, 200, "another client keeps its own limit");
    let metrics = http::get(nginx.port(), "/metrics").body;
    for counted in [
        "slidewin_requests_total{limiter=\"api\",outcome=\"allowed\"} 6\n",
        "slidewin_requests_total{limiter=\"api\",outcome=\"rejected\"} 3\n",
    ] {
        assert!(
            metrics.contains(counted),
            "/metrics lacks {counted}: {metrics}"
        );
    }
    let log = nginx.error_log();
    assert!(
        !log.contains("[error]") && !log.contains("[emerg]"),
        "{log}"
    );
}
