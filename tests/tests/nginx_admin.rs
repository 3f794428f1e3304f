//! The admin locations behind resty.slidewin.guard (nginx/admin.conf): a change a browser could
//! send cross-site, from a foreign origin, by GET or without the token is refused and changes
//! nothing (read back); the right one is applied and logged with who, what, old -> new.

use slidewin_tests::http::{self, Response};
use slidewin_tests::nginx::{Nginx, Prefix};

const TOKEN: &str = "s3cret-admin-token-0123456789";
const CHANGE: &str = "/slidewin/limits?limiter=api&limit=1";
const MARKER: (&str, &str) = ("X-Slidewin-Admin", "1");

fn start() -> Nginx {
    Nginx::start_with_env("admin.conf", 2, &[("SLIDEWIN_ADMIN_TOKEN", TOKEN.into())])
}

/// The live limit of limiter "api", read back through the admin location.
fn api_limit(nginx: &Nginx) -> u64 {
    let read = nginx.get("/slidewin/limits");
    assert_eq!(read.status, 200, "{}", read.body);
    let after = read.body.split("\"limit\":").nth(1).unwrap_or_default();
    after[..after.find(',').unwrap_or(0)]
        .parse()
        .unwrap_or_else(|_| panic!("no limit in {}", read.body))
}

/// `method path` with `headers`: asserts its status and that limiter "api" kept its limit of 5.
fn refused(
    nginx: &Nginx,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    status: u16,
) -> Response {
    let r = http::send(nginx.port(), method, path, headers, "limiter=api&limit=1");
    assert_eq!(r.status, status, "{method} {path} {headers:?}: {}", r.body);
    assert_eq!(
        api_limit(nginx),
        5,
        "{method} {path} {headers:?} changed the limit"
    );
    r
}

fn warned(nginx: &Nginx, reason: &str) {
    let log = nginx.error_log();
    assert!(
        log.lines().any(|l| l.contains("[warn]")
            && l.contains("slidewin admin: refused ")
            && l.contains(reason)),
        "no refusal logged with {reason:?}:\n{log}"
    );
}

#[test]
fn a_cross_site_form_post_changes_no_limit() {
    let nginx = start();
    // The request: a page on evil.example (or a rebinding name for 127.0.0.1).
    refused(
        &nginx,
        "POST",
        CHANGE,
        &[("Origin", "http://evil.example"), ("Host", "evil.example")],
        403,
    );
    // A form needs no Origin to be dangerous: every content type a form can send is refused
    // without the header, whatever its origin.
    let own = format!("http://127.0.0.1:{}", nginx.port());
    for content_type in [
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "text/plain",
    ] {
        for origin in [None, Some(own.as_str())] {
            let mut headers = vec![("Content-Type", content_type)];
            headers.extend(origin.map(|o| ("Origin", o)));
            let r = refused(&nginx, "POST", CHANGE, &headers, 403);
            assert_eq!(
                r.body.trim(),
                "a change needs the header X-Slidewin-Admin: 1 (or a JSON body), which a cross-site form cannot send"
            );
        }
    }
    warned(
        &nginx,
        "Origin \"http://evil.example\" is not the admin's own",
    );
    warned(
        &nginx,
        "from 127.0.0.1: a change needs the header X-Slidewin-Admin: 1",
    );
}

#[test]
fn a_foreign_origin_or_a_cross_site_fetch_changes_no_limit() {
    let nginx = start();
    let port = nginx.port();
    // Same-origin for a page on a name rebound to 127.0.0.1: its Host is its own, so the Host
    // is never what the Origin is checked against.
    let rebound = format!("evil.example:{port}");
    let r = refused(
        &nginx,
        "POST",
        CHANGE,
        &[
            MARKER,
            ("Origin", &format!("http://{rebound}")),
            ("Host", &rebound),
        ],
        403,
    );
    assert_eq!(
        r.body.trim(),
        format!(
            "Origin \"http://{rebound}\" is not the admin's own (http://127.0.0.1:{port}, \
             http://[::1]:{port}, http://localhost:{port})"
        )
    );
    refused(&nginx, "POST", CHANGE, &[MARKER, ("Origin", "null")], 403);
    refused(
        &nginx,
        "PUT",
        CHANGE,
        &[MARKER, ("Origin", &format!("https://127.0.0.1:{port}"))],
        403,
    );
    for site in ["cross-site", "same-site"] {
        let r = refused(
            &nginx,
            "POST",
            CHANGE,
            &[MARKER, ("Sec-Fetch-Site", site)],
            403,
        );
        assert_eq!(
            r.body.trim(),
            format!("Sec-Fetch-Site \"{site}\": a change must come from the admin's own origin")
        );
    }
    // allowed_origins replaces the loopback origins.
    refused(
        &nginx,
        "POST",
        "/origins/slidewin/limits?limiter=api&limit=1",
        &[MARKER, ("Origin", &format!("http://127.0.0.1:{port}"))],
        403,
    );
    warned(&nginx, "Sec-Fetch-Site \"cross-site\"");
}

#[test]
fn get_never_changes_a_limit() {
    let nginx = start();
    for method in ["GET", "HEAD", "PATCH"] {
        let r = refused(&nginx, method, CHANGE, &[MARKER], 405);
        assert_eq!(r.header("Allow"), Some("GET, HEAD, POST, PUT"));
    }
    let r = refused(&nginx, "GET", CHANGE, &[], 405);
    assert_eq!(
        r.body.trim(),
        "a change must use one of GET, HEAD, POST, PUT other than GET and HEAD, got GET"
    );
    warned(
        &nginx,
        "refused GET \"/slidewin/limits\" from 127.0.0.1: a change must use",
    );
}

#[test]
fn a_missing_or_wrong_token_changes_no_limit() {
    let nginx = start();
    let path = "/token/slidewin/limits?limiter=api&limit=2";
    let missing = refused(&nginx, "POST", path, &[MARKER], 401);
    assert_eq!(
        missing.header("WWW-Authenticate"),
        Some("Bearer realm=\"slidewin admin\"")
    );
    let same_length = "s3cret-admin-token-0123456780";
    let prefix = &TOKEN[..TOKEN.len() - 1];
    let longer = format!("{TOKEN}0");
    for token in [same_length, prefix, &longer] {
        let bearer = format!("Bearer {token}");
        let wrong = refused(
            &nginx,
            "POST",
            path,
            &[MARKER, ("Authorization", &bearer)],
            401,
        );
        assert_eq!(
            wrong.header("WWW-Authenticate"),
            Some("Bearer realm=\"slidewin admin\", error=\"invalid_token\"")
        );
    }
    let basic = format!("Basic {TOKEN}");
    refused(
        &nginx,
        "POST",
        path,
        &[MARKER, ("Authorization", &basic)],
        401,
    );
    // With a token, reading needs it too.
    let read = http::send(nginx.port(), "GET", "/token/slidewin/limits", &[], "");
    assert_eq!(read.status, 401, "{}", read.body);

    let bearer = format!("Bearer {TOKEN}");
    let right = http::send(
        nginx.port(),
        "POST",
        path,
        &[MARKER, ("Authorization", &bearer)],
        "",
    );
    assert_eq!(right.status, 200, "{}", right.body);
    assert_eq!(api_limit(&nginx), 2);
    let log = nginx.error_log();
    assert!(
        log.contains(
            "slidewin admin: 127.0.0.1 with the bearer token set limiter \"api\" window 1 (\"api\") limit 5 -> 2"
        ),
        "{log}"
    );
    warned(&nginx, "the bearer token is not the admin token");
    assert!(
        !log.contains("s3cret-admin-token"),
        "a token reached error.log:\n{log}"
    );
}

#[test]
fn the_right_request_is_applied_and_logged() {
    let nginx = start();
    let port = nginx.port();
    let own = format!("http://127.0.0.1:{port}");
    let set = http::send(
        port,
        "POST",
        "/slidewin/limits?limiter=api&limit=8",
        &[MARKER, ("Origin", &own), ("Sec-Fetch-Site", "same-origin")],
        "",
    );
    assert_eq!(
        (set.status, set.body.trim()),
        (
            200,
            "[{\"name\":\"api\",\"limit\":8,\"max_limit\":50,\"window_ms\":60000}]"
        )
    );
    assert_eq!(api_limit(&nginx), 8);
    // A JSON body is as good as the header: a browser preflights it too.
    let json = http::send(
        port,
        "PUT",
        "/slidewin/limits?limiter=api&limit=9",
        &[("Content-Type", "application/json; charset=utf-8")],
        "{}",
    );
    assert_eq!(json.status, 200, "{}", json.body);
    let ops = http::send(
        port,
        "POST",
        "/origins/slidewin/limits?limiter=api&limit=10",
        &[MARKER, ("Origin", "https://ops.example.com")],
        "",
    );
    assert_eq!(ops.status, 200, "{}", ops.body);
    assert_eq!(api_limit(&nginx), 10);
    let log = nginx.error_log();
    for change in ["5 -> 8", "8 -> 9", "9 -> 10"] {
        let line = format!(
            "slidewin admin: 127.0.0.1 set limiter \"api\" window 1 (\"api\") limit {change},"
        );
        assert!(
            log.lines()
                .any(|l| l.contains("[notice]") && l.contains(&line)),
            "no {line:?} in:\n{log}"
        );
    }
}

/// Zone "gateway"'s rules and their live limits, as the rules location reads them.
fn rules(nginx: &Nginx) -> String {
    let read = nginx.get("/slidewin/rules");
    assert_eq!(read.status, 200, "{}", read.body);
    read.body.trim().to_string()
}

#[test]
fn zone_rules_change_only_on_a_guarded_request() {
    let nginx = start();
    let port = nginx.port();
    let set = "/slidewin/rules?rule=plan&limit=1";
    let attempts = [
        (
            "POST",
            set,
            vec![("Content-Type", "application/x-www-form-urlencoded")],
            403,
        ),
        (
            "POST",
            set,
            vec![MARKER, ("Origin", "http://evil.example")],
            403,
        ),
        (
            "DELETE",
            "/slidewin/rules?rule=plan",
            vec![MARKER, ("Sec-Fetch-Site", "cross-site")],
            403,
        ),
        ("DELETE", "/slidewin/rules?rule=plan", vec![], 403),
        ("GET", set, vec![MARKER], 405),
    ];
    for (method, path, headers, status) in attempts {
        let r = http::send(port, method, path, &headers, "");
        assert_eq!(r.status, status, "{method} {path} {headers:?}: {}", r.body);
        assert_eq!(
            rules(&nginx),
            "{\"plan\":[3]}",
            "{method} {path} {headers:?}"
        );
    }
    let get = http::send(port, "GET", set, &[], "");
    assert_eq!(get.header("Allow"), Some("GET, HEAD, POST, PUT, DELETE"));

    let too_high = http::send(
        port,
        "POST",
        "/slidewin/rules?rule=plan&limit=31",
        &[MARKER],
        "",
    );
    assert_eq!(
        (too_high.status, too_high.body.trim()),
        (
            400,
            "lim:set_limit: limit must be a positive integer at most the window's max_limit, got 31"
        )
    );
    assert_eq!(rules(&nginx), "{\"plan\":[3]}");

    let applied = http::send(
        port,
        "POST",
        "/slidewin/rules?rule=plan&limit=7",
        &[MARKER],
        "",
    );
    assert_eq!((applied.status, applied.body.trim()), (200, "[7]"));
    assert_eq!(rules(&nginx), "{\"plan\":[7]}");
    let removed = http::send(port, "DELETE", "/slidewin/rules?rule=plan", &[MARKER], "");
    assert_eq!((removed.status, removed.body.trim()), (200, "{}"));
    let log = nginx.error_log();
    for line in [
        "slidewin admin: 127.0.0.1 set rule \"plan\" of zone \"gateway\" window 1 limit 3 -> 7,",
        "slidewin admin: 127.0.0.1 removed rule \"plan\" of zone \"gateway\" (limits 7),",
    ] {
        assert!(log.contains(line), "no {line:?} in:\n{log}");
    }
}

#[test]
fn a_token_that_cannot_be_read_stops_nginx_at_startup() {
    for (value, why) in [
        (
            None,
            "token_env must be a set environment variable (declare it with \"env NAME;\" in \
             nginx.conf), got \"SLIDEWIN_ADMIN_TOKEN\"",
        ),
        (
            Some(" "),
            "token_env must be a non-empty token, got \"SLIDEWIN_ADMIN_TOKEN\": it holds no token",
        ),
    ] {
        let prefix = Prefix::temporary(1);
        let mut command = prefix.command("admin.conf");
        match value {
            Some(v) => command.env("SLIDEWIN_ADMIN_TOKEN", v),
            None => command.env_remove("SLIDEWIN_ADMIN_TOKEN"),
        };
        let out = command.output().expect("run nginx");
        assert!(!out.status.success(), "nginx started with token {value:?}");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            prefix.error_log()
        );
        assert!(
            said.contains(&format!("resty.slidewin.guard: {why}")),
            "{said}"
        );
    }
}
