# frozen_string_literal: true

# New connections behind kept-alive ones, Oribi against its peers in one run:
#
#   bundle exec ruby bench/fairness.rb [--duration 10] [--clients 50] [--repeat 1]
#                                      [--servers oribi,puma] [--via direct,nginx]
#
# bench/apps/sleep.ru (the app waits 10 ms), 2 workers × 1 thread on a unix
# socket, directly or behind nginx (upstream keepalive 32). CLIENTS
# keep-alive clients (closed loop, Oribi::Loadgen) all connect at once and
# send for DURATION; beside them a probe opens a new connection every 100 ms
# and times its first response byte. A fair server serves a new connection
# within one round of the kept-alive ones: its first byte waits about as long
# as a keep-alive request does. The last lines give the first server's
# (Oribi's) numbers as a multiple of each peer's, medians over the repeats.
require_relative "scenario"
require_relative "suite/report"
require "optparse"

module Bench
  class Fairness
    PROBE_EVERY = 0.1

    def initialize(opts)
      @o = opts
    end

    def run
      puts "sleep.ru (10 ms), #{Scenario::WORKERS} workers x 1 thread, #{@o[:clients]} keep-alive clients, " \
           "#{@o[:duration]} s, a new connection every #{(PROBE_EVERY * 1000).round} ms"
      rows = []
      @o[:repeat].times do
        @o[:via].each do |via|
          @o[:servers].each do |name|
            rows << measure(name, via)
            print_row(rows.last)
          end
        end
      end
      print_ratios(rows)
    end

    private

    def measure(name, via)
      sc = Scenario.new(name, "sleep.ru", via: via)
      probes = []
      deadline = now + @o[:duration]
      prober = Thread.new { probe(sc, deadline, probes) }
      r = Oribi::Loadgen.run(threads: 2, connections: @o[:clients], duration: @o[:duration], timeout: 30,
                             request: sc.request, **sc.target)
      prober.join
      lat = r[:latency]
      errors = r[:errors].values.sum + probes.count(nil)
      probes = probes.compact.sort
      { label: sc.label, rate: r[:requests] / r[:elapsed], p50: lat[:p50] / 1e3, p99: lat[:p99] / 1e3,
        max: lat[:max] / 1e3, first_p50: pct(probes, 50), first_p99: pct(probes, 99),
        first_max: probes.last, errors: errors }
    ensure
      sc&.stop
    end

    # New connections, one request each: ms to the first byte (nil: failed).
    def probe(sc, deadline, out)
      at = now + PROBE_EVERY
      while at < deadline
        sleep(at - now) if at > now
        t = now
        begin
          s = sc.connect
          s.write(sc.request(close: true))
          out << (s.wait_readable(30) && s.read_nonblock(1, exception: false).is_a?(String) ? (now - t) * 1000 : nil)
        rescue SystemCallError, IOError
          out << nil
        ensure
          s&.close
        end
        at += PROBE_EVERY
      end
    end

    def pct(sorted, q) = sorted.empty? ? nil : sorted[[(sorted.size * q / 100.0).ceil - 1, 0].max]
    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    COLUMNS = %i[p50 p99 max first_p50 first_p99 first_max].freeze

    def print_row(r)
      @header ||= puts(format("%-14s %9s %8s %8s %8s %10s %10s %10s %6s", "server", "req/s", "p50 ms", "p99 ms",
                              "max ms", "new p50", "new p99", "new max", "errors")) || true
      puts format("%-14s %9.1f %8.1f %8.1f %8.1f %10.1f %10.1f %10.1f %6d", r[:label], r[:rate],
                  *COLUMNS.map { |k| r[k] || Float::NAN }, r[:errors])
    end

    # Medians over the repeats, then the first server (Oribi) as a multiple
    # of each other one: below 1 it waits less. Returns the medians by label
    # ("oribi direct"), what bench/goals.rb judges.
    def print_ratios(rows)
      med = rows.group_by { |r| r[:label] }.transform_values do |rs|
        (COLUMNS + [:rate]).to_h { |k| [k, Suite::Report.median(rs.map { |r| r[k] }) || Float::NAN] }
      end
      first = @o[:servers].first
      puts "\nmedian of #{@o[:repeat]}; #{first} as a multiple of each peer (below 1: #{first} waits less)"
      @o[:via].each do |via|
        base = med["#{first} #{via}"] or next
        @o[:servers].drop(1).each do |name|
          peer = med["#{name} #{via}"] or next
          puts format("%-22s p99 %.2f  max %.2f  new-connection p99 %.2f  new-connection max %.2f  req/s %.2f",
                      "#{first} / #{name} #{via}", base[:p99] / peer[:p99], base[:max] / peer[:max],
                      base[:first_p99] / peer[:first_p99], base[:first_max] / peer[:first_max],
                      base[:rate] / peer[:rate])
        end
      end
      med
    end
  end
end

if $PROGRAM_NAME == __FILE__
  opts = { duration: 10.0, clients: 50, repeat: 1, servers: %w[oribi puma], via: %w[direct nginx] }
  OptionParser.new do |o|
    o.on("-d", "--duration SECONDS", Float) { |v| opts[:duration] = v }
    o.on("-c", "--clients N", Integer) { |v| opts[:clients] = v }
    o.on("--repeat N", Integer) { |v| opts[:repeat] = v }
    o.on("--servers LIST", Array) { |v| opts[:servers] = v }
    o.on("--via LIST", Array) { |v| opts[:via] = v }
  end.parse!
  Bench::Fairness.new(opts).run
end
