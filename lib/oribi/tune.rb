# frozen_string_literal: true

require "optparse"
require "uri"
require "etc"
require "fileutils"
require "oribi/extension"
Oribi::Extension.require!("oribi_bench")
require "oribi/bench"
require "oribi/tune/slo"
require "oribi/tune/search"
require "oribi/tune/resources"
require "oribi/tune/server"
require "oribi/tune/recommend"
require "oribi/tune/report"
require "oribi/tune/plot"
require "oribi/tune/progress"

module Oribi
  # `oribi tune [options] RACKUP_FILE`: for each workers × threads setting,
  # start the app, warm it up, bisect the highest open-loop rate that meets
  # the SLO, record CPU and memory; then a table, a recommendation, JSON and
  # an HTML page. docs/TUNE.md describes the method and every option.
  module Tune
    class UsageError < StandardError; end

    class CLI
      def self.run(argv, out: $stdout, err: $stderr) = new(out, err).run(argv)

      DEFAULTS = { threads: [1, 2, 4, 8, 16], slo: "p99=200ms", path: "/", duration: 5.0, warmup: 2.0,
                   steps: 8, tolerance: 0.05, environment: "production", boot_timeout: 60.0 }.freeze
      QUICK = { duration: 1.0, warmup: 0.5, steps: 5, tolerance: 0.1 }.freeze
      BOOT = 2.0 # seconds a boot and a stop take, for the estimate

      def initialize(out, err)
        @out = out
        @err = err
      end

      # 0: a recommendation; 1: no setting met the SLO (or the run failed);
      # 2: bad flags.
      def run(argv)
        o = parse(argv.dup)
        @err.puts estimate(o)
        run = tune(o)
        write(o, run)
        @out.write(Report.text(run))
        Report.recommendation(run) ? 0 : 1
      rescue OptionParser::ParseError, UsageError, SLO::Error, URI::Error => e
        @err.puts "oribi tune: #{e.message.lines.first.chomp}"
        2
      rescue Loadgen::Error, SystemCallError => e
        @err.puts "oribi tune: #{e.message.lines.first.chomp}"
        1
      end

      def parse(argv)
        v = DEFAULTS.dup
        v[:workers] = (1..Etc.nprocessors).to_a
        quick = false
        given = []
        parser = OptionParser.new do |o|
          o.banner = "Usage: oribi tune [options] RACKUP_FILE\n" \
                     "       oribi tune [options] --url URL | --unix PATH   (a running server: the rate search only)\n\n" \
                     "Starts the app for each workers × threads setting, finds the highest rate meeting the SLO\n" \
                     "(bisection), and recommends a setting. The total time is estimated when it starts\n" \
                     "(defaults: #{Etc.nprocessors} × 5 settings of about 50 s each, #{minutes(Etc.nprocessors * 5 * 50)}). See docs/TUNE.md.\n\n"
          o.on("-w", "--workers LIST",
               "worker counts: 1..4 or 1,2,4 (default 1..CPUs = 1..#{Etc.nprocessors})") { |x| v[:workers] = self.class.list(x) }
          o.on("-t", "--threads LIST", "threads per worker: 1..4 or 1,2,4 (default 1,2,4,8,16)") { |x| v[:threads] = self.class.list(x) }
          o.on("--slo SLO", "latency objective, p50|p90|p95|p99|p99.9=TIME, comma-joined (default p99=200ms)") { |x| v[:slo] = x }
          o.on("--path PATH", "request path, with query (default /)") { |x| v[:path] = x }
          o.on("-H", "--header 'NAME: VALUE'", "request header; repeatable") { |x| (v[:headers] ||= []) << x }
          o.on("-d", "--duration TIME", "each probe at one rate (default 5s)") { |x| given << :duration && v[:duration] = Bench::CLI.seconds(x) }
          o.on("--warmup TIME",
               "discarded run after each boot, then as long again for the capacity estimate (default 2s)") do |x|
            given << :warmup && v[:warmup] = Bench::CLI.seconds(x)
          end
          o.on("--steps N", Integer, "probes per setting at most (default 8)") { |x| given << :steps && v[:steps] = x }
          o.on("--tolerance PCT", Float,
               "stop bisecting when the bracket is this narrow, % (default 5)") { |x| given << :tolerance && v[:tolerance] = x / 100 }
          o.on("--quick", "short probes for a first look or a test: -d 1s --warmup 500ms --steps 5 --tolerance 10") { quick = true }
          o.on("--memory-limit SIZE",
               "exclude settings whose RSS (master + workers) exceeds SIZE: 512M, 2G") { |x| v[:memory_limit] = self.class.size(x) }
          o.on("-E", "--env ENV", "RACK_ENV of the servers started (default production)") { |x| v[:environment] = x }
          o.on("--url URL", "tune against a server already running at URL (no sweep)") { |x| v[:url] = x }
          o.on("--unix PATH", "tune against a server already running on unix socket PATH (no sweep)") { |x| v[:unix] = x }
          o.on("--json FILE", "write the results as JSON") { |x| v[:json] = x }
          o.on("--html FILE", "write the HTML report (table and plots)") { |x| v[:html] = x }
          o.on("-o", "--output DIR", "write DIR/tune.txt, DIR/tune.json and DIR/tune.html") { |x| v[:output] = x }
        end
        parser.parse!(argv)
        v.merge!(QUICK.except(*given)) if quick # flags given win over --quick
        external = v[:url] || v[:unix]
        raise UsageError, "one RACKUP_FILE expected (oribi tune --help)" unless argv.size == (external ? 0 : 1)
        raise UsageError, "--url or --unix, not both" if v[:url] && v[:unix]

        v[:rackup] = argv[0]
        raise UsageError, "no such file: #{v[:rackup]}" if v[:rackup] && !File.file?(v[:rackup])

        check(v)
        v[:slo] = SLO.parse(v[:slo])
        v
      end

      # "1..4", "1,2,4", "2" -> [1, 2, 4]
      def self.list(s)
        items = s.split(",").flat_map do |part|
          case part.strip
          when /\A(\d+)\.\.(\d+)\z/ then (Regexp.last_match(1).to_i..Regexp.last_match(2).to_i).to_a
          when /\A\d+\z/ then [part.to_i]
          else raise UsageError, "bad list #{s.inspect} (use 1..4 or 1,2,4)"
          end
        end
        raise UsageError, "bad list #{s.inspect}: counts from 1" if items.empty? || items.any? { |i| i < 1 }

        items.uniq.sort
      end

      # Bytes from "512M", "2G", "100K", "1048576" (powers of 1024).
      def self.size(s)
        m = /\A(\d+(?:\.\d+)?)\s*([KMGT])?(?:i?B)?\z/i.match(s.strip) or raise UsageError, "bad size #{s.inspect} (use 512M, 2G)"
        (m[1].to_f * 1024**"_KMGT".index((m[2] || "_").upcase)).round
      end

      def check(v)
        raise UsageError, "--duration must be positive" unless v[:duration].positive?
        raise UsageError, "--warmup must be positive" unless v[:warmup].positive?
        raise UsageError, "--steps must be at least 2" unless v[:steps] >= 2
        raise UsageError, "--tolerance must be between 0 and 100" unless v[:tolerance].positive? && v[:tolerance] < 1
        raise UsageError, "--path must start with /" unless v[:path].start_with?("/")
        raise UsageError, "--threads at most 1024" if v[:threads].max > 1024
        (v[:headers] || []).each do |h|
          raise UsageError, "bad header #{h.inspect} (NAME: VALUE)" unless h.match?(Bench::Targets::HEADER)
        end
      end

      def settings(o)
        return [{ workers: nil, threads: nil }] if o[:url] || o[:unix]

        o[:workers].product(o[:threads]).map { |w, t| { workers: w, threads: t } }
      end

      # Boot, warm-up, estimate, every probe, and a second to settle after
      # each failed probe (about half of them).
      def estimate(o)
        n = settings(o).size
        each = (o[:url] || o[:unix] ? 0 : BOOT) + 2 * o[:warmup] + 0.3 + o[:steps] * (o[:duration] + 0.5)
        format("oribi tune: %d setting%s × (boot, %gs warm-up, %gs estimate, ≤ %d probes of %gs): about %s",
               n, n == 1 ? "" : "s", o[:warmup], o[:warmup], o[:steps], o[:duration], minutes(n * each))
      end

      def minutes(s) = s < 90 ? "#{s.round} s" : "#{(s / 60.0).round} min"

      def tune(o)
        list = settings(o)
        results = []
        @progress = Progress.new(@err) if @err.respond_to?(:tty?) && @err.tty?
        @stop = false
        old = %w[INT TERM HUP].to_h { |sig| [sig, trap(sig) { @stop = true }] } # stop and report; never leave a server behind
        list.each_with_index do |s, i|
          results << (@stop ? s.merge(status: :interrupted) : setting(o, s, i + 1, list.size, results))
        end
        { slo: o[:slo], path: o[:path], duration: o[:duration], tolerance: o[:tolerance], memory_limit: o[:memory_limit],
          results: results }
      ensure
        old&.each { |sig, handler| trap(sig, handler || "DEFAULT") }
        @progress&.finish
      end

      def write(o, run)
        if o[:output]
          FileUtils.mkdir_p(o[:output])
          File.write(File.join(o[:output], "tune.txt"), Report.text(run))
          File.write(File.join(o[:output], "tune.json"), Report.json(run))
          File.write(File.join(o[:output], "tune.html"), Plot.html(run, title: title(o)))
        end
        File.write(o[:json], Report.json(run)) if o[:json]
        File.write(o[:html], Plot.html(run, title: title(o))) if o[:html]
      end

      def title(o) = "oribi tune #{o[:rackup] || o[:url] || o[:unix]} (#{o[:slo]})"

      private

      def label(s) = s[:workers] ? "#{s[:workers]}w×#{s[:threads]}t" : "server"

      # One setting: boot (unless external), warm up, estimate, search,
      # measure memory, stop.
      def setting(o, s, index, total, results)
        lbl = label(s)
        if o[:memory_limit] && s[:workers] && (p = Recommend.projected_rss(results, s[:workers], s[:threads])) && p > o[:memory_limit]
          return s.merge(status: :projected, note: "#{Report.size(p)} > #{Report.size(o[:memory_limit])}")
        end

        show(lbl, index, total, "booting")
        server = Server.new(o[:rackup], workers: s[:workers], threads: s[:threads], environment: o[:environment],
                                        boot_timeout: o[:boot_timeout]) if s[:workers]
        target = server ? { unix_path: server.sock } : target(o)
        pids = server ? server.pids : []
        first_response(o, target)
        show(lbl, index, total, "warm-up + capacity estimate")
        concurrency = [(s[:workers] || 1) * (s[:threads] || 1) * 2, 4].max
        est = load(o, target, connections: concurrency, duration: o[:warmup], warmup: o[:warmup])
        capacity = Bench::Report.totals(est)[:throughput]
        idle = idle_latency(o, target)
        last = nil
        search = Search.new(tolerance: o[:tolerance], max_steps: o[:steps], confirm_below: capacity, measure: lambda { |rate, step|
          show(lbl, index, total, "probe #{step}/#{o[:steps]}", rate: rate, last_p99: last&.dig(:latency, :p99))
          settle(o, target, idle) if last && !last[:pass]
          last = probe(o, target, pids, rate, concurrency)
        })
        found = search.run(capacity.positive? ? capacity : 1.0)
        result = s.merge(steps: found.steps, capacity: capacity)
        if @stop
          result.merge!(status: :interrupted)
        elsif found.passed?
          smp = found.sample
          result.merge!(status: :ok, rate: found.rate, throughput: smp[:throughput], latency: smp[:latency], cpu: smp[:cpu])
        else
          result.merge!(status: :slo, note: explain(found.steps.last&.dig(:why), o))
        end
        result[:memory] = memory(server) if server
        result[:status] = :memory if result[:status] == :ok && Recommend.over_limit?(result, o[:memory_limit])
        result
      rescue Server::BootError => e
        s.merge(status: :boot, note: e.message.lines.first.chomp)
      ensure
        server&.stop
      end

      def show(*args, **kw) = @progress&.update(*args, **kw)

      def target(o)
        return { unix_path: o[:unix] } if o[:unix]

        uri = URI.parse(o[:url])
        raise UsageError, "bad URL #{o[:url].inspect}: http://host:port/ expected" unless uri.is_a?(URI::HTTP) && uri.host && !uri.host.empty?

        o[:path] = uri.request_uri if o[:path] == "/" && uri.request_uri != "/"
        { host: uri.host.delete_prefix("[").delete_suffix("]"), port: uri.port, authority: "#{uri.host}:#{uri.port}" }
      end

      def request(o, target)
        head = +"GET #{o[:path]} HTTP/1.1\r\nHost: #{target[:authority] || 'localhost'}\r\nUser-Agent: oribi-tune\r\n"
        (o[:headers] || []).each { |h| head << "#{h}\r\n" }
        (head << "\r\n").b
      end

      # One Loadgen run: closed loop with connections:, or open loop at rate:
      # on at most connections: (requests wait for one to be free, late:
      # their latency still runs from when they were due).
      def load(o, target, connections: nil, rate: nil, duration: nil, requests: nil, warmup: nil)
        run = { request: request(o, target), threads: 1, keepalive: true, duration: duration, requests: requests,
                timeout: [10 * o[:slo].longest, 2.0].max, **target.except(:authority) }
        run.merge!(rate ? { rate: rate, connections: 1, max_connections: connections } : { connections: connections })
        run[:warmup] = warmup if warmup
        Loadgen.run(run.compact) { @stop ? :stop : nil }
      end

      # Ready means serving: a booted master may still wait for its workers
      # to load the app. One request at a time until one is answered.
      def first_response(o, target)
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + o[:boot_timeout]
        until @stop || load(o, target, connections: 1, requests: 1)[:requests].positive?
          raise Server::BootError, "no response in #{o[:boot_timeout]}s" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

          sleep 0.05 # polling a condition (an answer), bounded above
        end
      end

      # One request at a time on an idle server: the latency to come back to.
      def idle_latency(o, target)
        r = load(o, target, connections: 1, duration: 0.3)
        r[:latency][:p50] ? r[:latency][:p50] / 1e6 : o[:slo].longest
      end

      # After an overloaded probe the server still holds its queue (the
      # listen backlog, requests being served for clients long gone): the
      # next probe would measure that queue, not its own rate. Send single
      # requests until one is answered about as fast as on an idle server.
      def settle(o, target, idle)
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + [10 * o[:slo].longest, 2 * o[:duration], 5.0].max
        until @stop || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
          us = load(o, target, connections: 1, requests: 1)[:latency][:max]
          break if us && us / 1e6 <= 2 * idle + 0.002

          sleep 0.05 unless us # an error, not an answer: no hammering
        end
      end

      # A probe at one rate, reduced to what the search and the report need:
      # rate × duration requests sent on schedule, every response awaited
      # (vegeta's way: nothing in flight goes uncounted).
      # Connections are bounded to twice what the rate needs at the SLO's
      # latency (Little's law) plus the server's concurrency: enough for any
      # rate that can pass, and an overloaded server is left with a queue it
      # clears in about twice the SLO, rather than the thousand requests an
      # unbounded open loop would pile up (which it would serve to clients
      # long gone, while the next probe waits behind them).
      def probe(o, target, pids, rate, concurrency)
        t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        cpu0 = Resources.cpu_seconds(pids)
        conns = [(2 * rate * o[:slo].longest).ceil + concurrency + 8, 1000].min
        r = load(o, target, rate: rate, connections: conns, requests: [(rate * o[:duration]).round, 1].max)
        wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
        t = Bench::Report.totals(r)
        lat = r[:latency].slice(:mean, :p50, :p90, :p95, :p99, :p999).transform_values { |us| us && us / 1e6 }
        sample = { rate: rate, requests: t[:total], ok: t[:ok], errors: r[:errors], statuses: r[:status],
                   elapsed: t[:elapsed], attack: t[:attack],
                   throughput: t[:throughput], latency: lat,
                   cpu: pids.empty? ? nil : (Resources.cpu_seconds(pids) - cpu0) / wall }
        return sample.merge(pass: false, why: "interrupted", stop: true) if @stop

        why = o[:slo].violation(sample)
        sample.merge(pass: why.nil?, why: why)
      end

      # A probe's failure, with what to do when the path itself is wrong.
      def explain(why, o)
        return why unless why&.match?(/\Aevery answer was 4\d\d\z/)

        "#{why} for GET #{o[:path]}: pass --path"
      end

      # RSS and PSS of the master, and per worker (mean), and in total.
      def memory(server)
        master = Resources.memory(server.pid) or return nil
        workers = server.worker_pids.filter_map { |pid| Resources.memory(pid) }
        return nil if workers.empty?

        mean = ->(k) { workers.sum { |m| m[k] } / workers.size }
        { master_rss: master[:rss], master_pss: master[:pss], worker_rss: mean.(:rss), worker_pss: mean.(:pss),
          total_rss: master[:rss] + workers.sum { |m| m[:rss] }, total_pss: master[:pss] + workers.sum { |m| m[:pss] } }
      end
    end
  end
end
