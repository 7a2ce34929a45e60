# frozen_string_literal: true

# New connections whose request comes a little after the connect, Oribi
# against an earlier build of it and its peers, in one run:
#
#   bundle exec ruby bench/late_writers.rb [--servers oribi,old=/tmp/o-41d4e21,unicorn,puma]
#       [--listeners unix,tcp,tcp-nodefer] [--modes now,writable,1ms] [--connections 1,4,8]
#       [--duration 3] [--rounds 3] [--app hello.ru] [--target /] [--burst 50] [--pin]
#
# A client (bench/late_writers.c, compiled with cc) opens a new connection
# per request and writes it at once (now), when the new socket polls
# writable (writable: wrk's way), or 1 ms after connect returns (1ms); or
# keeps its connection and sends one request at a time (keepalive) or 16
# (pipelined, TechEmpower's plaintext test); or runs wrk with
# `Connection: close` (wrk, TCP listeners only: wrk has no unix sockets); or
# keeps its connections alive in `oribi bench` (bench: two threads, each an
# event loop over its connections, as wrk's are, where keepalive gives each
# connection a thread of its own that sleeps in read between requests). A
# server that accepts before the request is there (a unix socket; TCP
# without TCP_DEFER_ACCEPT, tcp-nodefer here, as on macOS and the BSDs:
# bench/no_defer_accept.rb) sees the late ones as empty connections first.
#
# Each server: 2 workers x 1 thread, RACK_ENV=production. NAME=DIR runs
# exe/oribi of another checkout (built there with `rake compile`), e.g. a
# worktree of an earlier commit; NAME=DIR+FLAG+FLAG with flags of its own
# (poll=.+--busy-poll=50: this checkout with busy_poll). Every cell runs each server once per round,
# the order reversed every other round; the table gives the medians over
# the rounds, and each server's rate as a multiple of the first's.
#
# --burst N instead: N keep-alive clients connect at once and send requests
# (to bench/apps/sleepy.ru, which names its worker's pid) for the duration;
# the table says how many connections each worker took, per round (a worker
# that takes them all serves them alone for as long as they stay).
require_relative "pin"
require_relative "suite/process_group"
require_relative "suite/nginx"
require_relative "suite/servers"
require "fileutils"
require "json"
require "optparse"
require "socket"
require "tmpdir"

module Bench
  class LateWriters
    ROOT = File.expand_path("..", __dir__)
    CLIENT_SRC = File.join(__dir__, "late_writers.c")
    SHIM = File.join(__dir__, "no_defer_accept.rb")
    WORKERS = 2
    # The client's flags for a mode
    MODES = { "now" => %w[-m now], "writable" => %w[-m writable], "1ms" => %w[-m 1ms],
              "keepalive" => %w[-m keepalive], "pipelined" => %w[-m keepalive -P 16] }.freeze

    Spec = Struct.new(:name, :dir, :args, keyword_init: true)

    # "oribi", "NAME=DIR" (another checkout's oribi; DIR+FLAG+FLAG adds
    # flags: "poll=.+--busy-poll=50"), "unicorn", ... as Specs
    def self.specs(list)
      list.map do |s|
        name, dir = s.split("=", 2)
        dir, *args = dir.split("+") if dir
        Spec.new(name: name, dir: dir && File.expand_path(dir), args: args)
      end
    end

    # Each cell's medians per server: { kind:, mode:, conns:, label:, rate:,
    # p50:, p99:, max: (µs), errors:, pids: (a burst's, per round) }
    attr_reader :results

    def initialize(opts)
      @o = opts
      @results = []
      @server_cpus, @client_cpus = Pin.split if opts[:pin] && Pin.possible?
      @tmp = Dir.mktmpdir("oribi-late-", "/tmp")
      @client = File.join(@tmp, "late_writers")
      system("cc", "-O2", "-Wall", "-Wextra", "-pthread", "-o", @client, CLIENT_SRC) or abort "cc failed"
    end

    # Its client and servers' files, once done with it (run does it itself)
    def cleanup = FileUtils.rm_rf(@tmp)

    def run
      app = @o[:burst] ? "sleepy.ru" : @o[:app]
      puts "#{app} #{@o[:target]}, #{WORKERS} workers x 1 thread, #{@o[:rounds]} rounds" +
           (@o[:burst] ? ", a burst of #{@o[:burst]} keep-alive clients" : ", #{@o[:duration]} s per run")
      @o[:listeners].each do |kind|
        servers = []
        begin
          @o[:servers].each { |s| servers << start(s, kind, app) }
          @o[:burst] ? bursts(kind, servers) : cells(kind, servers)
        ensure
          servers.each { |s| s[:group].stop }
        end
      end
    ensure
      cleanup
    end

    # One run of the client against a server of start's: its key=value line
    # as numbers (rate, errors, p50, p90, p99, max)
    def client(server, mode, conns, *more)
      return wrk(server, conns) if mode == "wrk"
      return loadgen(server, conns) if mode == "bench"

      flags = MODES.fetch(mode) { abort "unknown mode #{mode} (#{MODES.keys.join(', ')})" }
      out = @last_out = run_client(server, *flags, "-c", conns.to_s, "-d", @o[:duration].to_s, *more)
      out.scan(/(\w+)=(-?[\d.]+)/).to_h { |k, v| [k.to_sym, v.to_f] }
    end

    # A server (Spec) listening on kind (unix, tcp, tcp-nodefer), once it answers
    def start(spec, kind, app)
      label = spec.name
      sock = File.join(@tmp, "#{label}.sock")
      port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] } unless kind == "unix"
      app_path = File.join(ROOT, "bench", "apps", app)
      argv = if spec.dir
               [Suite::RUBY, File.join(spec.dir, "exe", "oribi"), "-E", "production", "-w", WORKERS.to_s, "-t", "1",
                "-b", port ? "tcp://127.0.0.1:#{port}" : "unix://#{sock}", *spec.args, app_path]
             else
               Suite.server(spec.name).argv.call(@tmp, WORKERS, port ? nil : sock, port, app_path, app)
             end
      env = { "RACK_ENV" => "production", "BUNDLE_GEMFILE" => ENV.fetch("BUNDLE_GEMFILE", File.join(ROOT, "Gemfile")) }
      env["RUBYOPT"] = "#{ENV.fetch('RUBYOPT', '')} -r#{SHIM}" if kind == "tcp-nodefer"
      group = Suite::ProcessGroup.new(Pin.argv(@server_cpus, argv), env: env, log: File.join(@tmp, "#{label}-#{kind}.log"), chdir: ROOT)
      target = port ? { host: "127.0.0.1", port: port } : { unix_path: sock }
      failed = group.wait_ready(target, "GET #{@o[:target]} HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
      if failed
        group.stop
        abort "#{label}: #{failed}\n#{group.tail.join}"
      end
      { label: label, group: group, unix: port ? nil : sock, port: port }
    end

    private

    def cells(kind, servers)
      @o[:modes].each do |mode|
        @o[:connections].each do |conns|
          rows = servers.to_h { |s| [s[:label], []] }
          @o[:rounds].times do |r|
            (r.odd? ? servers.reverse : servers).each { |s| rows[s[:label]] << client(s, mode, conns) }
          end
          @cell = { kind: kind, mode: mode, conns: conns }
          report("#{kind}, #{mode}, #{conns} conn", rows)
        end
      end
    end

    def bursts(kind, servers)
      mode = @o[:modes].first
      rows = servers.to_h { |s| [s[:label], []] }
      @o[:rounds].times do |r|
        (r.odd? ? servers.reverse : servers).each do |s|
          rows[s[:label]] << client(s, mode, 1, "-b", @o[:burst].to_s).merge(pids: @last_out[/pids=(\S*)/, 1])
        end
      end
      @cell = { kind: kind, mode: mode, conns: @o[:burst] }
      report("#{kind}, a burst of #{@o[:burst]} keep-alive clients (#{mode})", rows)
      rows.each { |label, runs| puts format("  %-12s connections per worker: %s", label, runs.map { |x| x[:pids] }.join("  ")) }
    end

    def run_client(server, *args)
      where = server[:unix] ? ["-u", server[:unix]] : ["-p", server[:port].to_s]
      IO.popen(Pin.argv(@client_cpus, [@client, *where, "-t", @o[:target], *args]), &:read).tap do |out|
        abort "client failed against #{server[:label]}: #{out}" unless $?.success?
      end
    end

    # wrk, one thread per 64 connections, a new connection per request
    def wrk(server, conns)
      abort "wrk has no unix sockets: --modes wrk with a TCP listener" unless server[:port]
      argv = ["wrk", "-t", [(conns + 63) / 64, 1].max.to_s, "-c", conns.to_s, "-d", "#{[@o[:duration].round, 1].max}s", "--latency",
              "-H", "Connection: close", "http://127.0.0.1:#{server[:port]}#{@o[:target]}"]
      out = IO.popen(Pin.argv(@client_cpus, argv), err: %i[child out], &:read)
      abort "wrk failed against #{server[:label]}: #{out}" unless $?.success?
      pct = ->(q) { micros(out[/^\s+#{q}%\s+([\d.]+\w+)/, 1]) }
      errors = out.scan(/(?:connect|read|write|timeout) (\d+)/).sum { |(n)| n.to_i } + out[/Non-2xx.*?(\d+)/, 1].to_i
      { rate: out[%r{Requests/sec:\s+([\d.]+)}, 1].to_f, errors: errors, p50: pct.(50), p90: pct.(90), p99: pct.(99),
        max: micros(out[/Latency\s+\S+\s+\S+\s+(\S+)/, 1]) }
    end

    # oribi bench, kept alive: 2 threads, each an epoll loop over its share
    # of the connections
    def loadgen(server, conns)
      url = server[:port] ? "http://127.0.0.1:#{server[:port]}#{@o[:target]}" : "http://localhost#{@o[:target]}"
      argv = [Suite::RUBY, File.join(ROOT, "exe", "oribi"), "bench", "-T", "2", "-c", conns.to_s,
              "-d", "#{(@o[:duration] * 1000).round}ms", "--format", "json",
              *(server[:unix] ? ["--unix-socket", server[:unix]] : []), url]
      out = IO.popen(Pin.argv(@client_cpus, argv), err: File::NULL, &:read)
      abort "oribi bench failed against #{server[:label]}: #{out}" unless $?.success?
      r = JSON.parse(out)
      lat = r["latencies"].transform_values { |ns| ns / 1e3 }
      { rate: r["rate"], errors: r["requests"] - r["status_codes"].fetch("200", 0), p50: lat["50th"], p90: lat["90th"],
        p99: lat["99th"], max: lat["max"] }
    end

    def micros(text)
      return Float::NAN unless text =~ /\A([\d.]+)(us|ms|s)\z/

      $1.to_f * { "us" => 1, "ms" => 1e3, "s" => 1e6 }.fetch($2)
    end

    def report(cell, rows)
      puts "\n#{cell}"
      first = nil
      rows.each do |label, runs|
        rate = median(runs.map { |x| x[:rate] })
        first ||= rate
        errors = runs.sum { |x| x[:errors] }.to_i
        @results << { **@cell, label: label, rate: rate, errors: errors, max: runs.map { |x| x[:max] }.max,
                      p50: median(runs.map { |x| x[:p50] }), p99: median(runs.map { |x| x[:p99] }),
                      pids: runs.map { |x| x[:pids] }.compact }
        puts format("  %-12s %9.0f req/s  p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms  %5.2fx%s", label, rate,
                    median(runs.map { |x| x[:p50] }) / 1e3, median(runs.map { |x| x[:p99] }) / 1e3,
                    runs.map { |x| x[:max] }.max / 1e3, rate / first, errors.positive? ? "  errors #{errors}" : "")
      end
    end

    def median(a) = a.sort[a.size / 2]
  end

  def self.late_writers_main(argv)
    o = { servers: %w[oribi unicorn puma], listeners: %w[unix tcp-nodefer], modes: %w[now writable 1ms],
          connections: [1, 4], duration: 3.0, rounds: 3, app: "hello.ru", target: "/", burst: nil }
    OptionParser.new do |p|
      p.banner = "usage: bundle exec ruby bench/late_writers.rb [options]"
      p.on("--servers LIST", Array, "oribi, NAME=DIR[+FLAG...] (a checkout's oribi), unicorn, puma") { |v| o[:servers] = v }
      p.on("--listeners LIST", Array, "unix, tcp, tcp-nodefer (unix,tcp-nodefer)") { |v| o[:listeners] = v }
      p.on("--modes LIST", Array, "now, writable, 1ms, keepalive, pipelined, wrk, bench (now,writable,1ms)") { |v| o[:modes] = v }
      p.on("--connections LIST", Array, "client connections per cell (1,4)") { |v| o[:connections] = v.map(&:to_i) }
      p.on("--duration SECONDS", Float, "per run (3)") { |v| o[:duration] = v }
      p.on("--rounds N", Integer, "runs per server and cell, alternating (3)") { |v| o[:rounds] = v }
      p.on("--app FILE", "in bench/apps (hello.ru)") { |v| o[:app] = v }
      p.on("--target PATH", "the request's target (/)") { |v| o[:target] = v }
      p.on("--burst N", Integer, "a burst of N keep-alive clients instead, sleepy.ru") { |v| o[:burst] = v }
      p.on("--pin", "servers on the first half of the CPUs, the client on the rest (off)") { o[:pin] = true }
    end.parse!(argv)
    o[:servers] = LateWriters.specs(o[:servers])
    LateWriters.new(o).run
  end
end

Bench.late_writers_main(ARGV) if $PROGRAM_NAME == __FILE__
