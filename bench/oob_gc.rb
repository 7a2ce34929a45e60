# frozen_string_literal: true

# What out-of-band GC (oob_gc N) does to latency, for an app that allocates
# a lot per request (~200 KB of short-lived strings).
#
#   bundle exec rake compile
#   bundle exec ruby bench/oob_gc.rb [--duration 20] [--rate R | --load 0.5] [--gc 0,1,4,16] [--workers 1] [--rounds 3]
#
# One Oribi per setting (unix socket, `--workers`, default 1), loaded by
# Oribi::Loadgen in open loop — requests sent on a schedule, latency timed
# from the intended send time, so a GC pause delays the requests queued
# behind it too — at a fixed rate below capacity: --rate, or --load times
# the capacity measured first (closed loop, oob_gc off). A warm-up at the
# same rate is discarded. The app counts the GCs that ran inside app.call
# (GC.count before and after), answered on /gc, per worker. The settings
# run in turn, --rounds times (off, 1, 4, 16, off, 1, ...), so that a noisy
# neighbour hits them alike; the table has each setting's median round
# (by p99) and the spread of p99 over the rounds.
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../oribi-bench/lib", __dir__))
require "oribi"
require "oribi/loadgen"
require "oribi/bench/progress"
require "fileutils"
require "optparse"
require "socket"
require "tmpdir"

module Bench
  class OobGC
    ROOT = File.expand_path("..", __dir__)
    APP = <<~RUBY
      # ~200 KB of short-lived strings per request; /gc reports GC counts
      # and GC time (ms), inside app.call and in all.
      in_app = 0
      in_app_ms = 0
      requests = 0
      run lambda { |env|
        if env["PATH_INFO"] == "/gc"
          next [200, {}, ["\#{in_app} \#{requests} \#{GC.count} \#{in_app_ms} \#{GC.stat(:time)}\\n"]]
        end
        before = GC.count
        ms = GC.stat(:time)
        parts = Array.new(1500) { |i| "row \#{i} " * 12 }
        body = parts.last(2).join
        in_app += GC.count - before
        in_app_ms += GC.stat(:time) - ms
        requests += 1
        [200, { "content-type" => "text/plain" }, [body]]
      }
    RUBY

    def initialize(argv)
      @duration = 20
      @warmup = 3
      @load = 0.5
      @rate = nil
      @gc = [0, 1, 4, 16]
      @workers = 1
      @rounds = 3
      OptionParser.new do |o|
        o.on("--duration SEC", Float) { |v| @duration = v }
        o.on("--warmup SEC", Float) { |v| @warmup = v }
        o.on("--rate R", Float, "requests per second (default: --load x capacity)") { |v| @rate = v }
        o.on("--load F", Float, "fraction of the measured capacity (default 0.5)") { |v| @load = v }
        o.on("--gc LIST", Array, "oob_gc settings (default 0,1,4,16)") { |v| @gc = v.map { |x| Integer(x) } }
        o.on("--workers N", Integer) { |v| @workers = v }
        o.on("--rounds N", Integer) { |v| @rounds = v }
      end.parse!(argv)
      @tmp = Dir.mktmpdir("oribi-oobgc-", "/tmp")
      @app = File.join(@tmp, "app.ru")
      File.write(@app, APP)
    end

    def run
      @rate ||= calibrate
      puts format("open loop at %.0f req/s, %d worker(s), %gs measured after %gs warm-up", @rate, @workers, @duration, @warmup)
      runs = Hash.new { |h, k| h[k] = [] }
      @rounds.times { @gc.each { |n| runs[n] << measure(n) } }
      puts
      puts "| oob_gc | requests | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | late " \
           "| GCs in app.call / all | GC ms in app.call / all | p99 ms over rounds |"
      puts "|---|---|---|---|---|---|---|---|---|---|---|"
      @gc.each do |n|
        sorted = runs[n].sort_by { |r| r[:p99] }
        med = sorted[sorted.size / 2]
        spread = sorted.map { |r| format("%.1f", r[:p99] / 1000.0) }.join(" / ")
        puts "#{med[:row]} #{spread} |"
      end
    ensure
      FileUtils.rm_rf(@tmp)
    end

    private

    def calibrate
      with_server(0) do |sock|
        r = Oribi::Loadgen.run(unix_path: sock, request: request("/"), threads: 1, connections: 4, duration: 5)
        capacity = r[:requests] / r[:elapsed]
        puts format("capacity (closed loop, 4 connections, oob_gc off): %.0f req/s", capacity)
        capacity * @load
      end
    end

    def measure(n)
      with_server(n) do |sock|
        load_run(sock, @warmup, "oob_gc #{n} warm-up")
        before = gc_counts(sock)
        r = load_run(sock, @duration, "oob_gc #{n}")
        after = gc_counts(sock)
        l = r[:latency]
        ms = ->(us) { format("%.2f", us / 1000.0) }
        in_app = after[0] - before[0]
        all = after[2] - before[2]
        in_app_ms = after[3] - before[3]
        all_ms = after[4] - before[4]
        failed = r[:errors].values.sum + r[:status].reject { |s, _| s == 200 }.values.sum
        puts format("  oob_gc %-3d p50 %s ms  p99 %s ms  max %s ms  GCs in app %d / all %d, GC ms in app %d / all %d%s", n,
                    ms[l[:p50]], ms[l[:p99]], ms[l[:max]], in_app, all, in_app_ms, all_ms, failed.positive? ? "  FAILED #{failed}" : "")
        { p99: l[:p99],
          row: "| #{n.zero? ? 'off' : n} | #{r[:requests]} | #{ms[l[:p50]]} | #{ms[l[:p90]]} | #{ms[l[:p99]]} | " \
               "#{ms[l[:p999]]} | #{ms[l[:max]]} | #{r[:late]} | #{in_app} / #{all} | #{in_app_ms} / #{all_ms} |" }
      end
    end

    def load_run(sock, seconds, label)
      progress = Oribi::Bench::Progress.new($stderr)
      $stderr.write(label)
      r = Oribi::Loadgen.run(unix_path: sock, request: request("/"), threads: 1, rate: @rate, duration: seconds,
                             max_connections: 64) do |done, failed|
        progress.update(done, failed)
      end
      progress.finish
      r
    end

    def request(path) = "GET #{path} HTTP/1.1\r\nHost: bench\r\n\r\n"

    # [in_app, requests, GC.count] summed over the workers (asked until each answered).
    def gc_counts(sock)
      seen = {}
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
      while seen.size < @workers && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
        s = UNIXSocket.new(sock)
        s.write("GET /gc HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
        body = s.read.split("\r\n\r\n", 2).last
        s.close
        seen[body] = body.split.map(&:to_i) # one line per worker state; same worker twice is harmless
      end
      seen.values.transpose.map(&:sum)
    end

    def with_server(n)
      sock = File.join(@tmp, "s.sock")
      log = File.join(@tmp, "server.log")
      pid = Process.spawn({ "RACK_ENV" => "production" }, RbConfig.ruby, File.join(ROOT, "exe/oribi"), "-w", @workers.to_s,
                          "-b", "unix://#{sock}", "--oob-gc", n.to_s, @app, pgroup: true, out: log, err: log)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
      begin
        UNIXSocket.new(sock).close
      rescue SystemCallError
        raise "server did not start: #{File.read(log)}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

        sleep 0.1
        retry
      end
      yield sock
    ensure
      if pid
        Process.kill(:TERM, pid)
        Process.wait(pid)
      end
    end
  end
end

Bench::OobGC.new(ARGV).run if $PROGRAM_NAME == __FILE__
