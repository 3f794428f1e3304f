-- wrk script for scripts/bench-fault.sh: a mix of valid, hostile and huge requests on the demo.
--   45% /api/?user=u1..u50          valid clients (each admitted 5 per 10 s, then 429)
--   20% /api/?user=<7000-byte key>   a new key every time (the issue's memory attack)
--   10% /api-shared/ the same        long keys on the shared dict (digests, never a failure)
--   15% odd requests                 empty, NUL, UTF-8, repeated arguments, a 414-sized URI
--   10% /metrics and /stats.json
-- The statuses are counted per thread and summed in done().

local counter = 0
statuses = {} -- globals: read by done() through thread:get, set by setup()
thread_id = 0
local threads = {}

function setup(thread)
    thread:set("thread_id", #threads + 1)
    threads[#threads + 1] = thread
end

function init()
    math.randomseed(os.time() + thread_id)
end

local pad = string.rep("k", 7000)
local odd = {
    "/api/?user=", "/api/", "/api/?user=%00", "/api/?user=%C3%A9t%C3%A9", "/api/?user=a&user=b",
    "/api/?user=" .. string.rep("%FF", 200), "/api-shared/?user=", "/api/?user=" .. string.rep("z", 9000),
    "/api/../api/?user=x", "/nope",
}

function request()
    counter = counter + 1
    local roll = math.random(100)
    local path
    if roll <= 45 then
        path = "/api/?user=u" .. math.random(50)
    elseif roll <= 65 then
        path = "/api/?user=" .. thread_id .. "-" .. counter .. pad
    elseif roll <= 75 then
        path = "/api-shared/?user=" .. thread_id .. "-" .. counter .. pad
    elseif roll <= 90 then
        path = odd[math.random(#odd)]
    else
        path = roll <= 95 and "/metrics" or "/stats.json"
    end
    return wrk.format("GET", path)
end

function response(status)
    statuses[status] = (statuses[status] or 0) + 1
end

function done(summary)
    local total = {}
    for _, thread in ipairs(threads) do
        for status, n in pairs(thread:get("statuses")) do
            total[status] = (total[status] or 0) + n
        end
    end
    local list = {}
    for status, n in pairs(total) do
        list[#list + 1] = status .. ":" .. n
    end
    table.sort(list)
    io.write("statuses ", table.concat(list, " "), "\n")
end
