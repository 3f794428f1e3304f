//! Defects once found, reproduced inside real nginx (nginx/test.conf): a huge cost is a
//! refusal that resets nothing, headers carry exact digits, a limiter's __gc cannot crash the
//! worker, and a key longer than the shared dict allows is one digest key.

use slidewin_tests::nginx::Nginx;

#[test]
fn a_huge_cost_is_refused_and_resets_nothing_on_both_stores() {
    let nginx = Nginx::start("test.conf", 1);
    for (limiter, limit) in [("local", 30), ("shared", 100)] {
        let path = |cost: &str| format!("/cost/{limiter}?user=huge-cost&cost={cost}");
        let first = nginx.get(&path("1"));
        assert_eq!(first.status, 200, "{limiter}");
        for cost in ["9007199254740992", "1e17", "1e300"] {
            let refused = nginx.get(&path(cost));
            assert_eq!(
                refused.status, 429,
                "{limiter} cost {cost}: {}",
                refused.body
            );
            assert_eq!(refused.header("Retry-After"), None, "never fits");
        }
        let after = nginx.get(&path("1"));
        assert_eq!(after.status, 200);
        let remaining = format!("\"{limiter}\";r={};", limit - 2);
        assert!(
            after.header("RateLimit").unwrap().starts_with(&remaining),
            "{limiter}: the count was reset: {:?}",
            after.header("RateLimit")
        );
    }
}

#[test]
fn limits_up_to_2_pow_53_are_exact_digits_in_headers() {
    let nginx = Nginx::start("test.conf", 1);
    let r = nginx.get("/limit/huge?user=a");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("RateLimit-Policy"),
        Some("\"huge\";q=100000000000000;w=60")
    );
    assert_eq!(
        r.header("RateLimit"),
        Some("\"huge\";r=99999999999999;t=60")
    );
}

#[test]
fn a_limiter_freed_twice_through_its_gc_is_an_error_not_a_crash() {
    let nginx = Nginx::start("test.conf", 1);
    let pid = nginx.eval("return ngx.worker.pid()").body;
    let lua = "local l = require('slidewin').limiter{ limit = 1, window_ms = 1000 }
        local gc = debug.getmetatable(l).__gc
        gc(l); gc(l); collectgarbage(); collectgarbage()
        return l:incoming('a', true)";
    for _ in 0..3 {
        let out = nginx.eval(lua);
        assert_eq!(
            (out.status, out.body.as_str()),
            (
                500,
                "lim:incoming: the limiter was collected (its __gc ran)"
            )
        );
    }
    assert_eq!(
        nginx
            .eval("return getmetatable(require('slidewin').limiter{ limit = 1, window_ms = 1 })")
            .body,
        "false"
    );
    assert_eq!(nginx.eval("return ngx.worker.pid()").body, pid);
    assert!(!nginx.error_log().contains("exited on signal"));
}

#[test]
fn a_key_longer_than_the_dict_allows_is_one_digest_key_not_an_admission() {
    let nginx = Nginx::start("test.conf", 1);
    let lua = "local store = assert(require('resty.slidewin').new{ name = 'long', algorithm = 'counter',
            limit = 2, window_ms = 60000, store = 'shdict', dict = 'slidewin', max_key_bytes = 16 }).store
        local long = string.rep('k', 100000)
        local out = {}
        for _, key in ipairs { long, long, long, long .. 'x' } do
            out[#out + 1] = tostring((store:decide(key, 1, true)))
        end
        return table.concat(out, ' ')";
    let out = nginx.eval(lua);
    assert_eq!(
        (out.status, out.body.as_str()),
        (200, "true true false true")
    );
}
