# frozen_string_literal: true

require "etc"
require "oribi/tool_options"

module Oribi
  module Bench
    class UsageError < StandardError; end

    # Seconds from "10", "10s", "500ms", "2m", "1h".
    def self.seconds(s)
      m = /\A(\d+(?:\.\d+)?)(ms|s|m|h)?\z/.match(s.to_s) or
        raise UsageError, "bad duration #{s.inspect} (use 10s, 500ms, 2m)"
      m[1].to_f * { "ms" => 0.001, "s" => 1, nil => 1, "m" => 60, "h" => 3600 }[m[2]]
    end

    # Requests per second from "100", "100/s", "6000/m".
    def self.rate(s, zero: false)
      m = %r{\A(\d+(?:\.\d+)?)(?:/(s|m|h))?\z}.match(s.to_s) or
        raise UsageError, "bad rate #{s.inspect} (use 100, 100/s, 6000/m)"
      r = m[1].to_f / { nil => 1, "s" => 1, "m" => 60, "h" => 3600 }[m[2]]
      raise UsageError, "rate must be positive" unless r.positive? || zero

      r
    end

    # Rate stages, "100:10s,500:30s" (a rate for a time, in turn) or
    # "0-500:30s" (a ramp from one rate to the other): [[from, to, seconds]].
    def self.stages(s)
      stages = s.split(",", -1).map do |part|
        rates, time = part.split(":", 2)
        raise UsageError, "bad rate stage #{part.inspect} (use RATE:TIME or FROM-TO:TIME)" unless time

        from, to = rates.split("-", 2)
        from = rate(from, zero: true)
        [from, to ? rate(to, zero: true) : from, seconds(time)]
      end
      raise UsageError, "rate stages send nothing: every rate is 0" if stages.all? { |f, t, _| f.zero? && t.zero? }
      raise UsageError, "a rate stage needs a time above 0" unless stages.all? { |*, d| d.positive? }

      stages
    end

    # The report options a run and `oribi bench report` share.
    def self.report_options(formats)
      proc do
        report_format(formats)
        option :plot, "--plot FILE", "also write FILE, an HTML page: latency over time and by percentile " \
                                     "(checked writable before the run)"
        option :thresholds, "--threshold LIST", "exit 1 unless every one holds: p99<200ms,success>99.9%,errors<=10",
               type: THRESHOLDS, default: [].freeze
      end
    end

    THRESHOLDS = Options::Type.new(arg: "LIST", cli: ->(x) { Threshold.parse(x) }, repeat: true,
                                   show: ToolOptions::EACH.show)
    BODY = Options::Type.new(arg: "FILE", cli: ->(path) { File.binread(path) })

    # `oribi bench`'s options: docs/BENCH.md says more of each; the load
    # generator (C) takes every value from here and has no defaults.
    # --threads is the load generator's (-T, wrk's -t): tune's -t/--threads
    # is the server's threads per worker, as the server's own -t.
    OPTIONS = ToolOptions.new do
      option :threads, "-T", "--threads N", "threads, each with its own loop (lowered to the connections)",
             type: Options::INT, default: Options.computed("CPUs") { Etc.nprocessors }
      option :connections, "-c", "--connections N", "closed loop: connections, spread over the threads",
             type: Options::INT, default: 10
      duration "run for TIME: 10s, 500ms, 2m", default: Options.computed("10s, none with -n alone") { 10.0 }
      option :requests, "-n", "--requests N", "stop after N requests (completed or failed)", type: Options::INT
      option :rate, "-r", "--rate RATE", "open loop: send RATE requests per second (100, 100/s, 6000/m) on " \
                                         "schedule; or stages, 100:10s,500:30s, with ramps, 0-500:30s (they set " \
                                         "the duration)", default: Options.unset("off: closed loop") do |v, x|
        x.include?(":") ? v[:stages] = Bench.stages(x) : v[:rate] = Bench.rate(x)
      end
      option :max_connections, "--max-connections N", "open loop: connections at most", type: Options::INT,
                                                                                         default: 1000
      warmup "run TIME first and leave it out of the results (needs a duration)", default: Options.unset("none")
      option :method, "-m", "--method METHOD", "request method", default: "GET"
      headers
      option :body, "--body FILE", "request body from FILE, with its Content-Length", type: BODY
      targets
      option :unix_path, "--unix-socket PATH", "connect to PATH; the URL gives only the request's path and Host"
      option :keepalive, "--[no-]keepalive", "reuse connections; off: connect time is in the latency",
             type: Options::BOOL, default: true
      option :insecure, "--insecure", "https: do not check the server's certificate", type: Options::BOOL,
                                                                                      default: Options.unset("checked")
      option :sni, "--sni NAME", "https: the server name sent and checked in the certificate",
             default: Options.unset("the URL's host")
      option :tls_resume, "--[no-]tls-resume", "https: a new connection resumes the last TLS session the server " \
                                               "gave (an abbreviated handshake); off: a full handshake each",
             type: Options::BOOL, default: false
      option :timeout, "--timeout TIME", "per request, connect included; a timeout is an error",
             type: ToolOptions::TIME, default: 10.0
      instance_eval(&Bench.report_options(%w[text json hist]))
      # A results file, as the run goes; tune's -o/--output is a DIR for its
      # reports, written at the end (a tune run has no results file).
      option :output, "--output FILE", "also write every result to FILE as the run goes (oribi bench report FILE " \
                                       "reads it; checked writable before the run)", default: Options.unset("none")
    end

    # `oribi bench report [options] FILE...`
    REPORT_OPTIONS = ToolOptions.new do
      instance_eval(&Bench.report_options(%w[text json hist hlog]))
      option :interval, "--interval TIME", "hlog: the length of an interval", type: ToolOptions::TIME, default: 1.0
    end

    # What the load generator runs with when a caller (a test, a bench
    # script, tune) leaves a value out: the table's defaults.
    def self.run_defaults(run)
      defaults = OPTIONS.defaults.slice(:threads, :connections, :duration, :max_connections, :keepalive, :timeout)
      defaults.delete(:duration) unless default_duration?(run)
      defaults
    end

    # A count (-n) or rate stages end a run by themselves: the default
    # duration applies only without them.
    def self.default_duration?(run) = !run[:requests] && !run[:stages]
  end
end
