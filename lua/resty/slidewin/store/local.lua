-- resty.slidewin.store.local: the Rust limiter (require "slidewin") inside this worker.
--
-- State is per worker process: with N workers, one client may be admitted up to N x limit per
-- window, since each worker counts only the requests it serves. Use "shdict" (or "redis") when
-- the limit must hold for the whole node.

local slidewin = require "slidewin"

local _M = {}
local mt = { __index = _M }

function _M.new(conf)
    local ok, lim = pcall(slidewin.limiter, {
        algorithm = conf.algorithm,
        limit = conf.limit,
        window_ms = conf.window_ms,
        bucket_ms = conf.bucket_ms,
        max_keys = conf.max_keys,
        max_key_bytes = conf.max_key_bytes,
    })
    if not ok then
        return nil, lim
    end
    return setmetatable({ lim = lim, keys_per_worker = true }, mt)
end

function _M.incoming(self, key, cost, commit)
    return self.lim:decide(key, cost, commit)
end

function _M.uncommit(self, key, cost)
    return self.lim:uncommit(key, cost)
end

function _M.keys(self)
    return self.lim:stats().keys
end

return _M
