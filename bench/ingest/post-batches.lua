-- wrk script of bench/ingest.ts: every request POSTs a fresh batch of signals to /v1/signal or
-- /v2/signal, so every batch adds rules, as a pipeline's bulk load does.
--
-- Environment (set by bench/ingest.ts):
--   BENCH_WRK_API      v1 | v2
--   BENCH_WRK_BATCH    entries per batch (1000)
--   BENCH_WRK_START    first target's serial number (each target takes the next one)
--   BENCH_WRK_RANDOM   1 (the default of bench/ingest.ts): serial n is the even address
--                      11.0.0.0 + 2·perm(n), perm a fixed bijection of 0..2^29−1 that scatters
--                      neighbours over 11.0.0.0–74.255.255.254, as a pipeline reporting scanners
--                      sends them; 0: the even address 75.0.0.0 + 2n, in sequence
--
-- Either way every target is a distinct even address (no two are adjacent, so none coalesce and a
-- list publishes one network per stored rule), and the two forms never meet.
--   BENCH_WRK_HEADERS  request headers, one "Name: value" per line
--
-- At the end prints one line, `BENCHJSON {…}`: requests, their statuses, latency percentiles (µs).
-- Each wrk thread counts statuses in its own Lua state; done() (another state) gathers them.
local raw = os.getenv("BENCH_WRK_HEADERS") or ""
for line in string.gmatch(raw, "[^\n]+") do
  local name, value = string.match(line, "^([^:]+):%s*(.*)$")
  if name ~= nil then wrk.headers[name] = value end
end
local api = os.getenv("BENCH_WRK_API") or "v1"
local batch = tonumber(os.getenv("BENCH_WRK_BATCH") or "1000")
local serial = tonumber(os.getenv("BENCH_WRK_START") or "0")
local random = os.getenv("BENCH_WRK_RANDOM") == "1"
local path = "/" .. api .. "/signal"
-- A global: done() reads it from each thread with thread:get.
statuses = {}
local threads = {}

local bit = require("bit")
local SLOTS = 536870912 -- 2^29

-- x xor (x >> k), then x·a mod 2^29 (a odd, below 2^24, so the product is exact in a double):
-- each step is a bijection of 0..2^29−1, so the whole is one.
local function perm (x)
  x = bit.bxor(x, bit.rshift(x, 13))
  x = math.fmod(x * 11872635, SLOTS)
  x = bit.bxor(x, bit.rshift(x, 11))
  x = math.fmod(x * 9576203, SLOTS)
  return bit.bxor(x, bit.rshift(x, 15))
end

local function address (n)
  return string.format("%d.%d.%d.%d", math.floor(n / 16777216), math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
end

local function ip (serial)
  if random then return address(184549376 + 2 * perm(serial % SLOTS)) end -- 11.0.0.0
  return address(1258291200 + 2 * serial) -- 75.0.0.0
end

setup = function (thread)
  threads[#threads + 1] = thread
end

request = function ()
  local parts = {}
  for i = 1, batch do
    local a = ip(serial)
    serial = serial + 1
    if api == "v1" then
      parts[i] = '{"type":"access_rules","action":"block","ip":"' .. a .. '","expiration":3600,"description":"scanner seen by sensor 7"}'
    else
      parts[i] = '{"kind":"access_rule","op":"upsert","expires_in":3600,"reason":"scanner seen by sensor 7","labels":{"source":"ids","confidence":"high"},"rule":{"target":{"ip":"' .. a .. '"},"action":"block"}}'
    end
  end
  return wrk.format("POST", path, nil, "[" .. table.concat(parts, ",") .. "]")
end

response = function (status)
  statuses[status] = (statuses[status] or 0) + 1
end

done = function (summary, latency)
  local total = {}
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("statuses")) do total[status] = (total[status] or 0) + n end
  end
  local counts = {}
  for status, n in pairs(total) do counts[#counts + 1] = string.format('"%d":%d', status, n) end
  io.write(string.format(
    'BENCHJSON {"requests":%d,"durationMicros":%d,"errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d},"statuses":{%s},"p50Micros":%d,"p90Micros":%d,"p99Micros":%d,"maxMicros":%d}\n',
    summary.requests, summary.duration, summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout,
    table.concat(counts, ","), latency:percentile(50.0), latency:percentile(90.0), latency:percentile(99.0), latency.max))
end
