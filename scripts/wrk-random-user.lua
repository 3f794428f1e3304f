-- wrk -s: each request as one of 10000 users (?user=N after the URL's path), so a run drives
-- many keys at a few requests per second each, as real clients do, rather than one hot key.
math.randomseed(os.time())
request = function()
    return wrk.format("GET", wrk.path .. "?user=" .. math.random(1, 10000))
end
