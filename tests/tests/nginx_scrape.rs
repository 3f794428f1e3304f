//! What a scrape costs the requests beside it (nginx/scrape.conf, one worker): `/metrics` and
//! `/slidewin/top` over a region of 1.7 million keys walk it a step at a time, so a request to
//! another location on the same worker waits for a step, not for the whole walk.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Instant;

use slidewin_tests::nginx::Nginx;

#[test]
fn a_request_beside_a_scrape_of_a_full_gigabyte_region_waits_for_a_step_not_the_walk() {
    let nginx = Nginx::start_with_env("scrape.conf", 1, &[("SCRAPE_REGION", "1g".into())]);
    // 3 million keys over 1.74 million places: nearly every set full.
    let held: u64 = nginx
        .get("/fill?from=0&n=3000000")
        .body
        .trim()
        .parse()
        .unwrap();
    assert!(held > 1_600_000, "{held} keys held");

    let scraping = AtomicBool::new(true);
    let (mut scrapes, pings) = thread::scope(|s| {
        let pinger = s.spawn(|| {
            let mut waits = Vec::new();
            while scraping.load(Ordering::Relaxed) {
                let sent = Instant::now();
                assert_eq!(nginx.get("/ping").status, 200);
                waits.push(sent.elapsed());
            }
            waits
        });
        let mut scrapes = Vec::new();
        for path in ["/metrics", "/slidewin/top", "/metrics", "/slidewin/top"] {
            let sent = Instant::now();
            let r = nginx.get(path);
            scrapes.push(sent.elapsed());
            assert_eq!(r.status, 200, "{path}: {}", r.body);
            let live = format!("slidewin_keys{{limiter=\"big\"}} {held}\n");
            let listed = format!("\"live\":{held},");
            assert!(
                r.body.contains(&live) || r.body.contains(&listed),
                "{path}: {}",
                r.body
            );
        }
        scraping.store(false, Ordering::Relaxed);
        (scrapes, pinger.join().unwrap())
    });
    scrapes.sort();
    let median = scrapes[scrapes.len() / 2];
    let longest_wait = *pings.iter().max().unwrap();
    // A walk of the whole region takes a tenth of a second and more; a step about a millisecond.
    assert!(
        longest_wait < median / 4,
        "a ping waited {longest_wait:?}, a scrape took {median:?} (scrapes {scrapes:?})"
    );
    assert!(pings.len() > 20, "{} pings during the scrapes", pings.len());
}

#[test]
fn a_walk_a_step_at_a_time_answers_what_top_and_stats_answer() {
    let nginx = Nginx::start_with_env("scrape.conf", 1, &[("SCRAPE_REGION", "1m".into())]);
    assert_eq!(nginx.get("/fill?from=0&n=300").body.trim(), "300");
    let walked = nginx.eval(
        "local lim = require('limits'):get('big').store.lim \
         local function walk(n, budget_us) \
             local w, steps, over = lim:walk(n), 0 \
             repeat over, steps = lim:step(w, budget_us), steps + 1 until over ~= false \
             return over, steps, w \
         end \
         local scan, steps, w = walk(3, 0) \
         local _, err = pcall(lim.step, lim, w, 0) \
         local top, stats, counted = lim:top(3), lim:stats(), walk(nil, 1e9) \
         return steps .. ' ' .. scan.live .. '=' .. top.live .. ' ' \
             .. scan.admitted[3].key .. '=' .. top.admitted[3].key .. ' ' \
             .. scan.stats.keys .. '=' .. counted.stats.keys .. '=' .. stats.keys .. ' ' \
             .. tostring(counted.live) .. ' | ' .. err",
    );
    let (steps, rest) = walked.body.split_once(' ').unwrap();
    assert!(steps.parse::<u32>().unwrap() > 1, "{}", walked.body);
    assert!(
        rest.starts_with("300=300 k")
            && rest
                .ends_with(" 300=300=300 nil | lim:step: the walk is over (its answer was given)"),
        "{}",
        walked.body
    );
    let errors = nginx.eval(
        "local lim = require('limits'):get('big').store.lim \
         local out = {} \
         for _, call in ipairs { \
             function() return lim:walk(-1) end, \
             function() return lim:step(lim:walk(1), -5) end, \
             function() return lim:step(lim:walk(1)) end, \
             function() return lim:step({}, 1) end, \
         } do out[#out + 1] = select(2, pcall(call)) end \
         local here = require('slidewin').limiter{ \
             algorithm = 'log', limit = 1, window_ms = 1000 } \
         out[#out + 1] = select(2, here:step(here:walk(1), 1)) \
         return table.concat(out, '\\n')",
    );
    assert_eq!(
        errors.body,
        "lim:walk: n must be an integer from 0 to 10000, got -1\n\
         lim:step: budget_us must be a non-negative integer, got -5\n\
         lim:step: budget_us must be a number, got no value\n\
         lim:step: walk must be a walk (lim:walk(n)), got table\n\
         this store cannot list its keys (stores shm and zone can)"
    );
}
