-- wrk -s: each request as one of 10000 users (?user=N after the URL's path), so a run drives
-- many keys at a few requests per second each, as real clients do, rather than one hot key.
-- Each thread its own seed: threads seeded alike send the same users in the same order, so
-- every key would come in pairs a moment apart instead of at random.
local threads = 0
function setup(thread)
    threads = threads + 1
    thread:set("id", threads)
end
function init()
    math.randomseed(os.time() + 7919 * id)
end
request = function()
    return wrk.format("GET", wrk.path .. "?user=" .. math.random(1, 10000))
end
