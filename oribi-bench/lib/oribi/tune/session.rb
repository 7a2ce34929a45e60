# frozen_string_literal: true

require "uri"
require "etc"
require "oribi/loadgen"
require "oribi/bench"
require "oribi/tune/options"
require "oribi/tune/search"
require "oribi/tune/noise"
require "oribi/tune/resources"
require "oribi/tune/server"
require "oribi/tune/recommend"
require "oribi/tune/report"
require "oribi/tune/progress"

module Oribi
  module Tune
    # One tuning run, from parsed options (Tune::CLI's): for each workers ×
    # threads setting, start the app (or --apply it, or probe --url/--unix-socket),
    # warm it up, measure its closed-loop capacity, bisect the highest
    # open-loop rate that meets the SLO, record CPU and memory, stop it;
    # then measure contradicting settings again. run returns what
    # Report and Plot render. INT, TERM and HUP end it early, with the
    # settings done so far, and never leave a server behind.
    class Session
      BOOT = 2.0 # seconds a boot and a stop take, for the estimate

      # The settings a run measures: the sweep, or the one server at --url
      # or --unix-socket.
      def self.settings(o)
        return [{ workers: nil, threads: nil }] if (o[:url] || o[:unix]) && !o[:apply]

        o[:workers].product(o[:threads]).map { |w, t| { workers: w, threads: t } }
      end

      # Seconds a run takes at most: boot, warm-up, the capacity runs, every
      # probe, and a second to settle after each failed probe (about half
      # of them).
      def self.seconds(o)
        each = (o[:url] || o[:unix] ? 0 : BOOT) + (1 + o[:repeat]) * o[:warmup] + 0.3 + o[:steps] * (o[:duration] + 0.5)
        settings(o).size * each
      end

      # err: where the progress line goes, when it is a terminal.
      def initialize(o, err)
        @o = o
        @err = err
      end

      def run
        o = @o
        list = Session.settings(o)
        results = []
        @progress = Progress.new(@err) if @err.respond_to?(:tty?) && @err.tty?
        @stop = false
        old = %w[INT TERM HUP].to_h { |sig| [sig, trap(sig) { @stop = true }] } # stop and report; never leave a server behind
        list.each_with_index do |s, i|
          results << (@stop ? s.merge(status: :interrupted) : setting(o, s, i + 1, list.size, results))
        end
        { slo: o[:slo], path: o[:path], duration: o[:duration], tolerance: o[:tolerance], memory_limit: o[:memory_limit],
          results: results, contradictions: remeasure(o, results), cpus: Etc.nprocessors, noise_detection: Noise.detects?,
          run_with: o[:apply] || (Server::RUN_WITH[o[:server]] unless o[:url] || o[:unix]) }
      ensure
        old&.each { |sig, handler| trap(sig, handler || "DEFAULT") }
        @progress&.finish
      end

      private

      def label(s) = s[:workers] ? "#{s[:workers]}w×#{s[:threads]}t" : "server"

      # One setting: boot (unless external), warm up, estimate, search,
      # measure memory, stop.
      def setting(o, s, index, total, results, again: false)
        lbl = again ? "#{label(s)} again" : label(s)
        if o[:memory_limit] && s[:workers] && (p = Recommend.projected_rss(results, s[:workers], s[:threads])) && p > o[:memory_limit]
          return s.merge(status: :projected, note: "#{Report.size(p)} > #{Report.size(o[:memory_limit])}")
        end

        show(lbl, index, total, o[:apply] ? "--apply" : "booting")
        if o[:apply]
          Server.apply(o[:apply], workers: s[:workers], threads: s[:threads], timeout: o[:boot_timeout])
        elsif s[:workers]
          server = Server.new(o[:rackup], workers: s[:workers], threads: s[:threads], environment: o[:environment],
                                          kind: o[:server], boot_timeout: o[:boot_timeout])
        end
        target = server ? { unix_path: server.sock } : target(o)
        pids = server ? server.pids : []
        first_response(o, target)
        start = Noise.snapshot(pids) unless pids.empty?
        concurrency = [(s[:workers] || 1) * (s[:threads] || 1) * 2, 4].max
        capacity = capacity(o, target, concurrency, ->(what) { show(lbl, index, total, what) })
        idle = idle_latency(o, target)
        last = nil
        search = Search.new(tolerance: o[:tolerance], max_steps: o[:steps], confirm_below: capacity[:mean], measure: lambda { |rate, step|
          show(lbl, index, total, "probe #{step}/#{o[:steps]}", rate: rate, last_p99: last&.dig(:latency, :p99))
          settle(o, target, idle) if last && !last[:pass]
          last = probe(o, target, pids, rate, concurrency)
        })
        found = search.run(capacity[:mean].positive? ? capacity[:mean] : 1.0)
        result = s.merge(steps: found.steps, capacity: capacity, busy: start && Noise.others(start, Noise.snapshot(pids)))
        if @stop
          result.merge!(status: :interrupted)
        elsif found.passed?
          smp = found.sample
          result.merge!(status: :ok, rate: found.rate, interval: Noise.rate_interval(found.rate, found.bracket[1], capacity),
                        throughput: smp[:throughput], latency: smp[:latency], cpu: smp[:cpu])
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

      # Results that contradict others are measured once more, the lower of
      # each pair (noise only slows a run down), after the rest: later, so
      # a passing burst of load on the machine has a chance to be over. The
      # better of the two runs stands (results is updated in place); the
      # contradictions left are returned.
      def remeasure(o, results)
        suspects = Noise.contradictions(results).map { |c| c[:low] }.uniq(&:object_id)
        suspects.each_with_index do |r, i|
          break if @stop

          again = setting(o, r.slice(:workers, :threads), i + 1, suspects.size, results, again: true)
          first = r[:rate]
          r.replace(again) if (again[:rate] || 0) > (first || 0) || r[:status] != :ok && again[:status] == :ok
          r[:remeasured] = [first, again[:rate]]
        end
        Noise.contradictions(results)
      end

      # The closed loop at twice the setting's concurrency: one discarded
      # warm-up, then --repeat runs, each --warmup long: the capacity as
      # { mean:, half: (95% interval), n:, runs: [req/s] }.
      def capacity(o, target, concurrency, show)
        show.("warm-up")
        load(o, target, connections: concurrency, duration: o[:warmup])
        runs = (1..o[:repeat]).map do |i|
          show.("capacity #{i}/#{o[:repeat]}")
          Bench::Report.totals(load(o, target, connections: concurrency, duration: o[:warmup]))[:throughput]
        end
        Noise.interval(runs).merge(runs: runs)
      end

      def target(o)
        return { unix_path: o[:unix] } if o[:unix]

        uri = URI.parse(o[:url])
        raise UsageError, "bad URL #{o[:url].inspect}: http://host:port/ expected" unless uri.is_a?(URI::HTTP) && uri.host && !uri.host.empty?

        o[:path] = uri.request_uri if o[:path] == "/" && uri.request_uri != "/"
        { host: uri.host.delete_prefix("[").delete_suffix("]"), port: uri.port, authority: "#{uri.host}:#{uri.port}" }
      end

      # The raw requests: the --targets in turn, else GET --path; -H on
      # every one. A target's own host names its Host header only: the
      # load goes where tune aims it.
      def request(o, target)
        list = o[:target_list] || [Bench::Targets::Target.new(method: "GET", uri: URI("http://#{target[:authority] || 'localhost'}#{o[:path]}"),
                                                              headers: [], body: nil)]
        reqs = list.map { |t| Bench::Targets.request(t, headers: o[:headers], agent: "oribi-tune") }
        reqs.size == 1 ? reqs[0] : reqs
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
        before = Noise.snapshot(pids) unless pids.empty?
        conns = [(2 * rate * o[:slo].longest).ceil + concurrency + 8, 1000].min
        r = load(o, target, rate: rate, connections: conns, requests: [(rate * o[:duration]).round, 1].max)
        wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
        t = Bench::Report.totals(r)
        lat = r[:latency].slice(:mean, :p50, :p90, :p95, :p99, :p999).transform_values { |us| us && us / 1e6 }
        sample = { rate: rate, requests: t[:total], ok: t[:ok], errors: r[:errors], statuses: r[:status],
                   elapsed: t[:elapsed], attack: t[:attack],
                   throughput: t[:throughput], latency: lat,
                   cpu: pids.empty? ? nil : (Resources.cpu_seconds(pids) - cpu0) / wall,
                   busy: before && Noise.others(before, Noise.snapshot(pids)) }
        return sample.merge(pass: false, why: "interrupted", stop: true) if @stop

        why = o[:slo].violation(sample)
        sample.merge(pass: why.nil?, why: why)
      end

      # A probe's failure, with what to do when the path itself is wrong.
      def explain(why, o)
        return why unless why&.match?(/\Aevery answer was 4\d\d\z/)

        "#{why} for #{o[:targets] ? "the requests of #{o[:targets]}" : "GET #{o[:path]}"}: pass --path or --targets"
      end

      # RSS and PSS of the master, and per worker (mean), and in total; the
      # PSS ones nil where it is not known (without /proc).
      def memory(server)
        master = Resources.memory(server.pid) or return nil
        workers = server.worker_pids.filter_map { |pid| Resources.memory(pid) }
        return nil if workers.empty?

        known = ->(k) { [master, *workers].all? { |m| m[k] } }
        mean = ->(k) { workers.sum { |m| m[k] } / workers.size if known.(k) }
        total = ->(k) { master[k] + workers.sum { |m| m[k] } if known.(k) }
        { master_rss: master[:rss], master_pss: master[:pss], worker_rss: mean.(:rss), worker_pss: mean.(:pss),
          total_rss: total.(:rss), total_pss: total.(:pss) }
      end
    end
  end
end
