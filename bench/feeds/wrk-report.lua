-- wrk script: request headers from the WRK_HEADERS environment variable ("Name: value" lines),
-- optionally a new connection per request (WRK_CLOSE=1), and one JSON summary line at the end
-- (prefixed WRKJSON) for bench/feeds.ts to parse.
local raw = os.getenv("WRK_HEADERS") or ""
for line in string.gmatch(raw, "[^\n]+") do
  local name, value = string.match(line, "^([^:]+):%s*(.*)$")
  if name ~= nil then wrk.headers[name] = value end
end
if os.getenv("WRK_CLOSE") == "1" then
  wrk.headers["Connection"] = "close"
end

-- Optionally a rotation of requests (WRK_ROTATE: "path etag" lines; an empty etag sends none):
-- each request takes the next, so a run polls several feeds (the shards of one) with each one's
-- own ETag. A case that rotates rotates for every subject, so each pays the same client cost.
local rotation = {}
for line in string.gmatch(os.getenv("WRK_ROTATE") or "", "[^\n]+") do
  local path, tag = string.match(line, "^(%S+)%s*(.*)$")
  if path ~= nil then table.insert(rotation, { path = path, tag = tag }) end
end
if #rotation > 0 then
  local i = 0
  request = function()
    i = i % #rotation + 1
    local r = rotation[i]
    if r.tag ~= "" then wrk.headers["If-None-Match"] = r.tag end
    return wrk.format(nil, r.path)
  end
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50.0), latency:percentile(99.0), latency.max))
end
