//! The dashboard (js/dashboard) in a real headless Chromium, served by the real demo nginx
//! (nginx/demo.conf) on a free port: js/browser/dashboard.mjs drives traffic to /api/ and checks
//! the chart's data and the page's console; the screenshot lands in tests/artifacts/.

use std::process::Command;

use slidewin_tests::nginx::{repo_root, Nginx};

#[test]
#[ignore = "needs the built package and Chromium: run by `make test-js`"]
fn dashboard_charts_allowed_and_refused_requests_from_the_demo() {
    let root = repo_root();
    assert!(
        root.join("js/dashboard/vendor/pkg/slidewin_bg.wasm")
            .is_file(),
        "the dashboard's package is missing: run `make js` first"
    );
    let nginx = Nginx::start("demo.conf", 1);
    let artifacts = root.join("tests/artifacts");
    std::fs::create_dir_all(&artifacts).expect("create tests/artifacts");
    let status = Command::new("node")
        .arg("browser/dashboard.mjs")
        .arg(format!("http://127.0.0.1:{}", nginx.port()))
        .arg(artifacts.join("dashboard.png"))
        .current_dir(root.join("js"))
        .status()
        .expect("run node (is it installed?)");
    assert!(
        status.success(),
        "the dashboard check failed (see above); nginx error.log:\n{}",
        nginx.prefix.error_log()
    );
}
