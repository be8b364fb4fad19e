-- wrk script of bench/wrk_submit.sh: every request POSTs a new command job to /v1/jobs with the
-- bearer token in WRK_TOKEN (a distinct name per thread and request), and every response's
-- status is counted, so the summary can tell accepted submissions (201) from refusals.
local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  statuses = {}
  n = 0
  auth = "Bearer " .. os.getenv("WRK_TOKEN")
end

function request()
  n = n + 1
  local body = string.format(
    '{"name":"wrk-%d-%d","kind":"command","resources":{"nodes":1,"ranks_per_node":1},' ..
    '"command":["true"]}', tid, n)
  return wrk.format("POST", "/v1/jobs",
                    {["Authorization"] = auth, ["Content-Type"] = "application/json"}, body)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local total, parts = {}, {}
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("statuses")) do total[k] = (total[k] or 0) + v end
  end
  for k, v in pairs(total) do table.insert(parts, string.format('"%d":%d', k, v)) end
  local seconds = summary.duration / 1e6
  io.write(string.format(
    '{"bench":"wrk_submit","seconds":%.2f,"requests":%d,"accepted":%d,"accepted_per_s":%.1f,' ..
    '"p50_ms":%.2f,"p99_ms":%.2f,"max_ms":%.2f,"socket_errors":%d,"statuses":{%s}}\n',
    seconds, summary.requests, total[201] or 0, (total[201] or 0) / seconds,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    table.concat(parts, ",")))
end
