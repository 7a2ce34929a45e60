# frozen_string_literal: true

# Slow POST: CLIENTS connections each send a request head announcing a
# 1 MB body, then trickle it at BPS bytes per second (one Ruby thread
# drives them all), against a server of WORKERS workers on a unix socket.
# Once they are all connected a normal client sends GETs at RATE per second
# for DURATION seconds (Oribi::Loadgen, open loop, 5 s timeout). Reports the
# normal client's latency and success, and how the tricklers ended (408,
# closed, or still open at the end). Puma runs the same when installed.
#
#   ruby -Ilib bench/slow_bodies.rb [--clients 1000] [--bps 300] [--workers 2] [--rate 50]
#        [--duration 10] [--servers oribi,puma] [--oribi-args "--min-body-rate 0"]
require "optparse"
require "socket"
require "tmpdir"
require "fileutils"
require "rbconfig"
require "oribi/loadgen"
require_relative "slow_clients"

module SlowBodies
  ROOT = File.expand_path("..", __dir__)
  APP = File.join(ROOT, "bench/apps/hello.ru")
  HEAD = "POST /slow HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n"
  TICK = 0.2

  def self.now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def self.command(server, sock, o)
    case server
    when "oribi"
      [RbConfig.ruby, "-I#{ROOT}/lib", "#{ROOT}/exe/oribi", "-E", "production", "-w", o[:workers].to_s, "-t", "1",
       "-b", "unix://#{sock}", *o[:oribi_args], APP]
    when "puma"
      [RbConfig.ruby, "-S", "puma", "-e", "production", "-w", o[:workers].to_s, "-t", "1:1", "-b", "unix://#{sock}", "-q", APP]
    end
  end

  def self.start(server, dir, o)
    sock = File.join(dir, "#{server}.sock")
    pid = Process.spawn(*command(server, sock, o), %i[out err] => File.join(dir, "#{server}.log"), pgroup: true)
    deadline = now + 30
    until begin
      UNIXSocket.new(sock).close || true
    rescue SystemCallError
      false
    end
      raise "#{server} did not start" if now > deadline

      sleep 0.05 # polling for the listener; nothing to wait on
    end
    [pid, sock]
  end

  # Trickles until stop_at; → { status => count } of how each ended.
  def self.trickle(socks, bps, stop_at)
    chunk = "x" * (bps * TICK).round
    open = socks.dup
    ended = Hash.new(0)
    next_tick = now
    while now < stop_at && !open.empty?
      if now >= next_tick
        open.each { |s| s.write_nonblock(chunk, exception: false) rescue nil } # rubocop:disable Style/RescueModifier
        next_tick += TICK
      end
      ready, = IO.select(open, nil, nil, [next_tick - now, 0.001].max)
      (ready || []).each do |s|
        status = SlowClients.answer(s)
        next if status == :wait_readable

        ended[status || "closed"] += 1
        open.delete(s)
      end
    end
    ended["still open"] = open.size unless open.empty?
    ended
  end

  def self.run(server, o)
    dir = Dir.mktmpdir("oribi-slow-bodies")
    pid, sock = start(server, dir, o)
    socks = Array.new(o[:clients]) { UNIXSocket.new(sock).tap { |s| s.write(HEAD) } }
    t0 = now
    driver = Thread.new { trickle(socks, o[:bps], t0 + o[:duration] + 2) }
    load = Oribi::Loadgen.run(unix_path: sock, request: "GET / HTTP/1.1\r\nHost: a\r\n\r\n", rate: o[:rate],
                              duration: o[:duration], threads: 1, max_connections: 50, timeout: 5)
    ended = driver.value
    lat = load[:latency]
    ms = ->(us) { us ? format("%.1f ms", us / 1000.0) : "-" }
    puts format("%-6s normal client: %d requests, %d errors, status %s, p50 %s p99 %s max %s; tricklers: %s",
                server, load[:requests], load[:errors].values.sum, load[:status].inspect, ms[lat[:p50]], ms[lat[:p99]],
                ms[lat[:max]], ended.inspect)
  ensure
    socks&.each(&:close)
    if pid
      Process.kill(:TERM, -pid)
      Process.wait(pid)
    end
    FileUtils.rm_rf(dir) if dir
  end

  def self.main(argv)
    o = { clients: 1000, bps: 300, workers: 2, rate: 50.0, duration: 10.0, servers: %w[oribi puma], oribi_args: [] }
    OptionParser.new do |p|
      p.on("--clients N", Integer) { |v| o[:clients] = v }
      p.on("--bps N", Integer, "each trickler's bytes per second (default 300)") { |v| o[:bps] = v }
      p.on("--workers N", Integer) { |v| o[:workers] = v }
      p.on("--rate N", Float, "the normal client's requests per second (default 50)") { |v| o[:rate] = v }
      p.on("--duration SEC", Float) { |v| o[:duration] = v }
      p.on("--servers LIST", Array) { |v| o[:servers] = v }
      p.on("--oribi-args ARGS") { |v| o[:oribi_args] = v.split }
    end.parse!(argv)
    hard = Process.getrlimit(:NOFILE)[1]
    Process.setrlimit(:NOFILE, [o[:clients] + 200, hard].min, hard)
    o[:servers].select! { |s| s == "oribi" || system(RbConfig.ruby, "-S", "puma", "--version", %i[out err] => File::NULL) }
    o[:servers].each { |s| run(s, o) }
    0
  end
end

exit SlowBodies.main(ARGV) if $PROGRAM_NAME == __FILE__
