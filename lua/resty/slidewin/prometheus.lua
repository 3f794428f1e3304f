-- resty.slidewin.prometheus: the one writer of Prometheus text (exposition format 0.0.4) for
-- every producer of /metrics (limiters, window usage, adaptive limits, Redis topologies), so
-- that each family has its HELP and TYPE once and every label value is escaped.
--
--   local REQUESTS = prometheus.family("slidewin_requests_total", "counter", "Decisions by outcome.")
--   local out = prometheus.new()
--   out:sample(REQUESTS, { "limiter", name, "outcome", "allowed" }, 12)
--   out:sample(RATIO, { "limiter", name, "le", "0.5" }, 3, "_bucket")   -- a histogram's series
--   out:text()   -- families in the order first sampled, each with all its samples
--
-- A family is known by its name: samples of families of one name go under the first's HELP.
-- Labels are a flat list of name, value pairs, written in that order. A label value is
-- escaped as the format asks (backslash, double quote, newline); one that is not UTF-8 is
-- read as Latin-1 (each byte of 128 and above as its code point), as resty.slidewin.json
-- reads it, so that any name gives valid text and none is lost. Values: integers as integers,
-- others to 17 significant digits (or as `format` says), NaN and the infinities as the format
-- spells them.

local is_utf8 = require("resty.slidewin.json").is_utf8

local byte = string.byte
local char = string.char
local concat = table.concat
local floor = math.floor
local format = string.format
local gsub = string.gsub
local huge = math.huge
local setmetatable, tostring = setmetatable, tostring

local _M = {}
local mt = { __index = _M }

local TYPES = { counter = true, gauge = true, histogram = true, summary = true, untyped = true }
local ESCAPES = { ["\\"] = "\\\\", ['"'] = '\\"', ["\n"] = "\\n" }

-- A metric family: its name, type and help text, made once at load.
function _M.family(name, type, help)
    if not name:find("^[%a_:][%w_:]*$") then
        error("prometheus.family: name must be a metric name, got " .. tostring(name), 2)
    end
    if not TYPES[type] then
        error("prometheus.family: type must be a Prometheus metric type, got " .. tostring(type), 2)
    end
    return { name = name, type = type, help = gsub(gsub(help, "\\", "\\\\"), "\n", "\\n") }
end

-- A byte of 128 and above as the UTF-8 of its Latin-1 code point.
local function latin1(c)
    local b = byte(c)
    return char(0xC0 + floor(b / 64), 0x80 + b % 64)
end

function _M.label_value(s)
    s = tostring(s)
    if not is_utf8(s) then
        s = gsub(s, "[\128-\255]", latin1)
    end
    return (gsub(s, '[\\"\n]', ESCAPES))
end
local label_value = _M.label_value

local function number(v, fmt)
    if v ~= v then
        return "NaN"
    elseif v == huge then
        return "+Inf"
    elseif v == -huge then
        return "-Inf"
    elseif fmt then
        return format(fmt, v)
    elseif v % 1 == 0 and v > -2 ^ 53 and v < 2 ^ 53 then
        return format("%d", v)
    end
    return format("%.17g", v)
end

-- An empty exposition.
function _M.new()
    return setmetatable({ order = {}, samples = {} }, mt)
end

-- Adds a sample of `family` with `labels` (name, value, ...) and `value`; `suffix` names a
-- series of the family (a histogram's "_bucket", "_sum", "_count"); `fmt` a format for the
-- value ("%.4f").
function _M.sample(self, family, labels, value, suffix, fmt)
    local lines = self.samples[family.name]
    if not lines then
        lines = {}
        self.samples[family.name] = lines
        self.order[#self.order + 1] = family
    end
    local pairs_ = {}
    for i = 1, #labels, 2 do
        pairs_[#pairs_ + 1] = labels[i] .. '="' .. label_value(labels[i + 1]) .. '"'
    end
    local series = family.name .. (suffix or "")
    if pairs_[1] then
        series = series .. "{" .. concat(pairs_, ",") .. "}"
    end
    lines[#lines + 1] = series .. " " .. number(value, fmt) .. "\n"
end

-- The exposition's text: each family's HELP and TYPE, then its samples.
function _M.text(self)
    local out = {}
    for _, family in ipairs(self.order) do
        out[#out + 1] = "# HELP " .. family.name .. " " .. family.help .. "\n# TYPE " .. family.name
            .. " " .. family.type .. "\n" .. concat(self.samples[family.name])
    end
    return concat(out)
end

return _M
