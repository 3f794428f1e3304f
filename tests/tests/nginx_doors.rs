//! One region, two doors (nginx/doors.conf): the zone nginx.conf's `slidewin_zone api`
//! declares, in resty.slidewin's registry as limiter "native" (store "nginx"), is listed and
//! changed by the admin location, named by its top keys, counted in /metrics and /stats.json,
//! and a limit set there holds for the native `slidewin_limit` in every worker.

use std::collections::BTreeSet;
use std::thread;

use slidewin_tests::http;
use slidewin_tests::metrics::{promtool_check, sample};
use slidewin_tests::nginx::{native_module, Nginx};

fn start(workers: u32) -> Nginx {
    native_module();
    Nginx::start("doors.conf", workers)
}

#[test]
fn explore() {
    let nginx = start(4);
    for p in ["/slidewin/limits", "/slidewin/top?n=1", "/metrics", "/stats.json"] {
        let r = nginx.get(p);
        println!("{p} {} {}", r.status, r.body);
    }
    for _ in 0..12 {
        nginx.get("/native?user=hog");
    }
    for p in ["/slidewin/top?n=1", "/slidewin/top?key=hog", "/metrics", "/stats.json"] {
        let r = nginx.get(p);
        println!("{p} {} {}", r.status, r.body);
    }
    let r = http::admin_post(nginx.port(), "/slidewin/limits?limiter=native&limit=8&window=api-10s");
    println!("{} {}", r.status, r.body);
    let r = nginx.get("/lua-native?user=hog");
    println!("{} {:?}", r.status, r.headers);
    let _ = (BTreeSet::<u8>::new(), thread::current(), promtool_check as fn(&str), sample as fn(&str, &str) -> u64);
    println!("{}", nginx.error_log());
}
