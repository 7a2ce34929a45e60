# frozen_string_literal: true

# What Prometheus does for a fleet, run in the balancer's network namespace
# by test/fleet_test.rb: GET /metrics of each host's control endpoint
# every INTERVAL seconds on average with the token (ORIBI_CONTROL_TOKEN),
# one JSON line per scrape on stdout, until TERM:
#
#   ruby fleet_scraper.rb INTERVAL NAME=ADDRESS:PORT...
#   {"at":UNIX_TIME,"host":NAME,"metrics":{"NAME{LABELS}":VALUE,...}}
#   {"at":UNIX_TIME,"host":NAME,"error":"..."}   (refused, timed out, not 200)
require "json"
require "net/http"

token = ENV.fetch("ORIBI_CONTROL_TOKEN")
interval = Float(ARGV.shift)
targets = ARGV.map do |arg|
  name, address = arg.split("=", 2)
  host, port = address.split(":")
  [name, host, Integer(port)]
end
$stdout.sync = true
trap("TERM") { exit }

def scrape(host, port, token)
  res = Net::HTTP.start(host, port, open_timeout: 0.5, read_timeout: 0.5) do |http|
    http.get("/metrics", "Authorization" => "Bearer #{token}")
  end
  return { error: "status #{res.code}" } unless res.code == "200"

  metrics = res.body.each_line.filter_map do |line|
    next if line.start_with?("#")

    name, value = line.split
    [name, Float(value)] if value
  end
  { metrics: metrics.to_h }
rescue SystemCallError, IOError, Timeout::Error, Net::HTTPBadResponse => e
  { error: "#{e.class}: #{e.message}" }
end

loop do
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  targets.each do |name, host, port|
    at = Time.now.to_f
    puts JSON.generate({ at: at, host: name }.merge(scrape(host, port, token)))
  end
  # The scrape interval (a pace, not a synchronisation), jittered: gauges
  # sampled in step with the load's fixed schedule would always find the
  # same phase of it.
  pause = interval * (0.5 + rand)
  sleep [pause - (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started), 0].max
end
