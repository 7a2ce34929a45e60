# frozen_string_literal: true

# Requests that wait on an upstream, many at once: --connections clients
# (a closed loop, `oribi bench`), each request making a real HTTP call
# (Net::HTTP, a new connection each) to a local upstream that answers after
# --wait seconds. --workers workers, for each server in turn: Oribi with
# `fibers`, Puma 8 with `max_io_threads` (the app marks its requests, as
# Puma 8 asks), Falcon where it is installed. The upstream is
# bench/upstream.c (built here), a C server whose CPU leaves the machine to
# the servers measured; the same for every server.
# Printed per server: requests per second (connections ÷ mean latency, and
# the report's throughput, which counts the last requests' drain as time),
# latency p50/p99, the share that succeeded, and the workers' RSS at the end.
#
#   bundle exec ruby bench/fibers.rb [--connections 2000] [--wait 1] [--duration 10]
#       [--workers 2] [--servers oribi,puma,falcon]
require "json"
require "optparse"
require "rbconfig"
require "socket"
require "tmpdir"
require "fileutils"
require_relative "../test/support/wait"
require_relative "../oribi-bench/lib/oribi/process_group"
require_relative "peer_servers"

module FiberBench
  ROOT = File.expand_path("..", __dir__)
  ORIBI = [RbConfig.ruby, File.join(ROOT, "exe/oribi")].freeze
  APP = <<~RUBY
    require "net/http"
    UP = URI("http://127.0.0.1:\#{ENV.fetch('UPSTREAM_PORT')}/")
    run lambda { |env|
      env["puma.mark_as_io_bound"]&.call # Puma 8: the request stops counting against threads
      [200, {}, [Net::HTTP.get(UP)]]
    }
  RUBY

  module_function

  def command(server, dir, port, o)
    room = (o[:connections] + 100).to_s
    PeerServers.command(server, dir, port, File.join(dir, "app.ru"), workers: o[:workers],
                        oribi: ["--fibers", room, "--max-connections", room],
                        puma: ["threads 5, 5", "max_io_threads #{o[:connections]}"])
  end

  def start(cmd, port, log, env, nofile)
    group = Oribi::ProcessGroup.new(cmd, log: log, env: env, rlimit_nofile: nofile)
    ready = wait_until(timeout: 60) { (TCPSocket.new("127.0.0.1", port).close || true) rescue false } # rubocop:disable Style/RescueModifier
    abort File.read(log) unless ready
    group
  end

  def free_port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }

  def run(server, o)
    dir = Dir.mktmpdir("oribi-fibers")
    upstream = File.join(dir, "upstream")
    system("cc", "-O2", "-o", upstream, File.join(__dir__, "upstream.c"), exception: true)
    File.write(File.join(dir, "app.ru"), APP)
    nofile = 4 * o[:connections] + 256
    up_port = free_port
    up = start([upstream, up_port.to_s, (o[:wait] * 1000).round.to_s], up_port, File.join(dir, "up.log"), {}, nofile)
    port = free_port
    group = start(command(server, dir, port, o), port, File.join(dir, "log"), { "UPSTREAM_PORT" => up_port.to_s }, nofile)
    out = IO.popen([*ORIBI, "bench", "-c", o[:connections].to_s, "-T", "2", "-d", "#{o[:duration]}s",
                    "--warmup", "#{o[:wait] * 2}s", "--timeout", "#{o[:wait] * 10}s", "--json",
                    "http://127.0.0.1:#{port}/"], &:read)
    r = JSON.parse(out)
    rss = group.worker_pids.sum { |pid| File.read("/proc/#{pid}/status")[/^VmRSS:\s+(\d+)/, 1].to_i }
    # Completed per second in the steady state, by Little's law (a closed
    # loop keeps every connection busy): the report's throughput counts the
    # drain after the last second as time, its rate the warm-up's requests.
    { rate: o[:connections] / (r.dig("latencies", "mean") / 1e9), throughput: r["throughput"],
      p50: r.dig("latencies", "50th"), p99: r.dig("latencies", "99th"),
      errors: r["errors"]&.size || 0, success: r["success"], rss_mib: rss / 1024.0, raw: r }
  ensure
    group&.stop
    up&.stop
    FileUtils.rm_rf(dir) if dir
  end
end

if $PROGRAM_NAME == __FILE__
  o = { connections: 2000, wait: 1.0, duration: 10, workers: 2, servers: %w[oribi puma] }
  OptionParser.new do |p|
    p.on("--connections N", Integer) { |v| o[:connections] = v }
    p.on("--wait SEC", Float) { |v| o[:wait] = v }
    p.on("--duration SEC", Integer) { |v| o[:duration] = v }
    p.on("--workers N", Integer) { |v| o[:workers] = v }
    p.on("--servers LIST", Array) { |v| o[:servers] = v }
  end.parse!
  puts format("%-8s %10s %11s %10s %10s %8s %10s", "server", "req/s", "throughput", "p50", "p99", "success", "RSS MiB")
  o[:servers].each do |server|
    r = FiberBench.run(server, o)
    ms = ->(ns) { ns ? format("%.0f ms", ns / 1e6) : "-" }
    puts format("%-8s %10.0f %11.0f %10s %10s %8s %10.1f", server, r[:rate], r[:throughput].to_f, ms.(r[:p50]), ms.(r[:p99]),
                r[:success] ? format("%.1f%%", r[:success] * 100) : "-", r[:rss_mib])
  end
end
