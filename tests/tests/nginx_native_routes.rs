//! The native module where a request moves, beside nginx's own `limit_req` in one nginx
//! (nginx/native-routes.conf): a request is decided once through internal redirects
//! (`try_files`, `index`, `error_page`, named locations) and `auth_request` subrequests,
//! keeps its `$slidewin_status` there, and a refusal by one zone charges no other.

use slidewin_tests::http::Response;
use slidewin_tests::nginx::{native_module, Nginx};

fn start() -> Nginx {
    native_module();
    let nginx = Nginx::start("native-routes.conf", 1);
    for door in ["sw", "lr"] {
        let dir = nginx.prefix.dir.join(format!("html/{door}/index"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("index.html"), "index\n").unwrap();
    }
    nginx
}

/// Four requests of one key on `route` through `door` (`sw`: slidewin_limit, `lr`:
/// limit_req): their statuses.
fn statuses(nginx: &Nginx, door: &str, route: &str) -> Vec<u16> {
    (0..4)
        .map(|_| {
            nginx
                .get(&format!("/{door}/{route}?k={door}-{route}"))
                .status
        })
        .collect()
}

#[test]
fn a_request_is_decided_once_through_redirects_and_subrequests_as_limit_req() {
    let nginx = start();
    for (route, expected) in [
        ("try/missing", [200, 200, 200, 429]),
        ("index/", [200, 200, 200, 429]),
        ("gone/missing", [404, 404, 404, 429]),
        ("named/missing", [200, 200, 200, 429]),
        ("auth/x", [200, 200, 200, 429]),
    ] {
        assert_eq!(
            statuses(&nginx, "lr", route),
            expected,
            "limit_req, {route}"
        );
        assert_eq!(statuses(&nginx, "sw", route), expected, "slidewin, {route}");
    }
    // The status survives the redirect into the access log, as $limit_req_status does.
    let log = std::fs::read_to_string(nginx.prefix.dir.join("logs/routes.log")).unwrap();
    let line = |uri: &str, n: usize| -> String {
        let mut lines = log.lines().filter(|l| l.starts_with(uri));
        lines
            .nth(n)
            .unwrap_or_else(|| panic!("{uri}: {log}"))
            .to_string()
    };
    assert_eq!(
        line("/sw/try/missing?", 0),
        "/sw/try/missing?k=sw-try/missing 200 PASSED -"
    );
    assert_eq!(
        line("/sw/try/missing?", 3),
        "/sw/try/missing?k=sw-try/missing 429 REJECTED -"
    );
    assert_eq!(
        line("/lr/try/missing?", 0),
        "/lr/try/missing?k=lr-try/missing 200 - PASSED"
    );
    assert_eq!(
        line("/sw/named/missing?", 2),
        "/sw/named/missing?k=sw-named/missing 200 PASSED -"
    );
}

/// The values of every header called `name`.
fn all<'r>(r: &'r Response, name: &str) -> Vec<&'r str> {
    let named = r
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name));
    named.map(|(_, v)| v.as_str()).collect()
}

#[test]
fn a_redirected_answer_carries_one_decisions_headers() {
    let nginx = start();
    let r = nginx.get("/sw/try/missing?k=h");
    assert_eq!(all(&r, "RateLimit"), [r#""z";r=2;t=60"#]);
    assert_eq!(all(&r, "RateLimit-Policy"), [r#""z";q=3;w=60"#]);
    // A refusal answered by an error_page in a location under the same limit.
    let answers: Vec<Response> = (0..4).map(|_| nginx.get("/sw/busy/x?k=b")).collect();
    let last = &answers[3];
    assert_eq!((last.status, last.body.as_str()), (429, "busy\n"));
    assert_eq!(all(last, "Retry-After"), ["60"]);
    assert_eq!(all(last, "RateLimit"), [r#""z";r=0;t=60"#]);
}

/// The statuses of `n` requests to `path`.
fn run(nginx: &Nginx, path: &str, n: usize) -> Vec<u16> {
    (0..n).map(|_| nginx.get(path).status).collect()
}

#[test]
fn a_refusal_by_one_zone_charges_none_of_the_others() {
    let nginx = start();
    // Refused by b (2 a minute) twice: a (5) and c (3) hold the two admitted only.
    assert_eq!(run(&nginx, "/three?a=A&b=B1&c=C", 4), [200, 200, 429, 429]);
    // Refused by c, the last: a and b give back what they had just admitted.
    assert_eq!(run(&nginx, "/three?a=A&b=B2&c=C", 2), [200, 429]);
    assert_eq!(run(&nginx, "/a?a=A", 3), [200, 200, 429], "a held 3 of 5");
    assert_eq!(run(&nginx, "/b?b=B2", 2), [200, 429], "b held 1 of 2");
    assert_eq!(run(&nginx, "/c?c=C", 1), [429], "c held 3 of 3");
    // Refused by a, the first: the others are not asked.
    assert_eq!(run(&nginx, "/three?a=A&b=B3&c=C3", 1), [429]);
    assert_eq!(run(&nginx, "/b?b=B3", 2), [200, 200]);
    let metrics = nginx.get("/metrics").body;
    for line in [
        r#"slidewin_requests_total{limiter="a",outcome="allowed"} 5"#,
        r#"slidewin_requests_total{limiter="a",outcome="rejected"} 2"#,
        r#"slidewin_requests_total{limiter="b",outcome="allowed"} 6"#,
        r#"slidewin_requests_total{limiter="c",outcome="allowed"} 3"#,
        r#"slidewin_requests_total{limiter="c",outcome="rejected"} 2"#,
    ] {
        assert!(metrics.contains(&format!("{line}\n")), "{line}: {metrics}");
    }
}
