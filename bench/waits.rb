# frozen_string_literal: true

# Requests that wait on an upstream, beside a hello: N clients at once,
# each sending a request whose app marks it as waiting on IO (Puma 8's
# env["puma.mark_as_io_bound"].call) and then sleeps --wait seconds, and
# one client asking for hello every 10 ms on a kept-alive connection
# meanwhile. One worker, --threads threads, max_io_threads --io-threads
# (Oribi's io_threads), for each server in turn. Printed per server: the
# waits answered within --deadline seconds of being sent, and hello's
# latency (p50, p99, max) while they ran; with --unmarked too, the same for
# requests that do not mark themselves.
#
#   bundle exec ruby bench/waits.rb [--clients 300] [--wait 1] [--threads 3] [--io-threads 400]
#       [--deadline 4] [--servers oribi,puma] [--unmarked]
require "optparse"
require "rbconfig"
require "socket"
require "tmpdir"
require "fileutils"
require_relative "../test/support/wait"
require_relative "../oribi-bench/lib/oribi/process_group"
require_relative "peer_servers"

module Waits
  APP = <<~RUBY
    WAIT = Float(ENV.fetch("WAIT_SECONDS"))
    run lambda { |env|
      next [200, {}, ["hello"]] unless env["PATH_INFO"] == "/wait"
      env["puma.mark_as_io_bound"]&.call if env["QUERY_STRING"] == "marked=1"
      sleep WAIT
      [200, {}, ["waited"]]
    }
  RUBY

  module_function

  def command(server, dir, port, o)
    PeerServers.command(server, dir, port, File.join(dir, "app.ru"), workers: 1,
                        oribi: ["-t", o[:threads].to_s, "--io-threads", o[:io_threads].to_s],
                        puma: ["threads #{o[:threads]}, #{o[:threads]}", "max_io_threads #{o[:io_threads]}"])
  end

  def run(server, o, marked)
    dir = Dir.mktmpdir("oribi-waits")
    File.write(File.join(dir, "app.ru"), APP)
    port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
    log = File.join(dir, "log")
    group = Oribi::ProcessGroup.new(command(server, dir, port, o), log: log, env: { "WAIT_SECONDS" => o[:wait].to_s },
                                                                   rlimit_nofile: o[:clients] + 256)
    ready = wait_until(timeout: 60) { (TCPSocket.new("127.0.0.1", port).close || true) rescue false } # rubocop:disable Style/RescueModifier
    abort File.read(log) unless ready
    get = ->(s, path) { s.write("GET #{path} HTTP/1.1\r\nHost: t\r\n\r\n") }
    hello = TCPSocket.new("127.0.0.1", port)
    3.times { get.call(hello, "/"); read_response(hello) } # warm
    t0 = now
    waits = Array.new(o[:clients]) { TCPSocket.new("127.0.0.1", port).tap { |s| get.call(s, "/wait?marked=#{marked ? 1 : 0}") } }
    lat = []
    hellos = Thread.new do
      while now - t0 < o[:deadline]
        t = now
        get.call(hello, "/")
        read_response(hello)
        lat << now - t
        sleep 0.01
      end
    end
    answered = answered_within(waits, t0 + o[:deadline])
    hellos.join
    waits.each(&:close)
    lat.sort!
    { answered: answered, p50: lat[lat.size / 2], p99: lat[(lat.size * 0.99).floor], max: lat.last, hellos: lat.size }
  ensure
    group&.stop
    FileUtils.rm_rf(dir) if dir
  end

  # How many of socks had a whole response by deadline (monotonic)
  def answered_within(socks, deadline)
    bufs = socks.to_h { |s| [s, +""] }
    done = 0
    until bufs.empty? || (left = deadline - now) <= 0
      ready, = IO.select(bufs.keys, nil, nil, left)
      (ready || []).each do |s|
        chunk = s.read_nonblock(4096, exception: false)
        if chunk.nil? || chunk == :wait_readable
          bufs.delete(s) if chunk.nil?
          next
        end
        bufs[s] << chunk
        next unless bufs[s].include?("waited")

        done += 1
        bufs.delete(s)
      end
    end
    done
  end

  def read_response(s)
    buf = +""
    buf << s.readpartial(4096) until buf.include?("\r\n\r\n") && buf.end_with?("hello")
  end
end

if $PROGRAM_NAME == __FILE__
  o = { clients: 300, wait: 1.0, threads: 3, io_threads: 400, deadline: 4.0, servers: %w[oribi puma], unmarked: false }
  OptionParser.new do |p|
    p.on("--clients N", Integer) { |v| o[:clients] = v }
    p.on("--wait SEC", Float) { |v| o[:wait] = v }
    p.on("--threads N", Integer) { |v| o[:threads] = v }
    p.on("--io-threads N", Integer) { |v| o[:io_threads] = v }
    p.on("--deadline SEC", Float) { |v| o[:deadline] = v }
    p.on("--servers LIST", Array) { |v| o[:servers] = v }
    p.on("--unmarked", "the same with requests that do not mark themselves") { o[:unmarked] = true }
  end.parse!
  puts format("%-8s %-9s %18s %10s %10s %10s %7s", "server", "requests", "answered in #{o[:deadline]} s",
              "hello p50", "p99", "max", "hellos")
  [true, (false if o[:unmarked])].compact.each do |marked|
    o[:servers].each do |server|
      r = Waits.run(server, o, marked)
      ms = ->(v) { v ? format("%.1f ms", v * 1000) : "-" }
      puts format("%-8s %-9s %18s %10s %10s %10s %7d", server, marked ? "marked" : "unmarked",
                  "#{r[:answered]}/#{o[:clients]}", ms.(r[:p50]), ms.(r[:p99]), ms.(r[:max]), r[:hellos])
    end
  end
end
