-- resty.slidewin.store.shm (the default store): one region of shared memory for all workers
-- of this nginx, holding every key's window for the three algorithms, exact like the
-- in-process limiter (slidewin::shared::Zone; see docs/openresty.md, "Shared memory").
--
-- Made in init_by_lua* (the master maps the region before the workers fork). conf.size
-- (bytes, or "64k" / "10m") bounds all its memory; conf.max_key_bytes (64) is the longest key
-- stored as it is (longer keys are stored as a keyed 128-bit digest); conf.full says what a
-- full set does with a new key: "evict" (the default) the least recently used one, forgetting
-- its window, or "refuse" the new key until a way empties. The region outlives
-- `nginx -s reload` when the config is unchanged; a changed one starts afresh, said once in
-- error.log. The store counts its own decisions (allowed, rejected, evictions) in the region.

local base = require "resty.slidewin.store.local"
local bytes = require("resty.slidewin.config").bytes

local _M = {}

function _M.new(conf)
    local phase = ngx and ngx.get_phase and ngx.get_phase()
    if phase and phase ~= "init" then
        return nil, 'store "shm" must be made in init_by_lua* (before the workers fork), not in '
            .. phase
    end
    local size = bytes(conf.size or "10m")
    if not size then
        return nil, 'size must be a number of bytes or a size like "10m", got ' .. tostring(conf.size)
    end
    local store, note = base.over({
        windows = conf.windows,
        shared = conf.name,
        size = size,
        max_key_bytes = conf.max_key_bytes,
        full = conf.full,
    }, { counts_decisions = true })
    if store and note and ngx and ngx.log then
        ngx.log(ngx.WARN, "slidewin: ", note)
    end
    return store, note
end

return setmetatable(_M, { __index = base })
