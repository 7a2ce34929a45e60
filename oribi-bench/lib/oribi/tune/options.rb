# frozen_string_literal: true

require "etc"
require "oribi/tool_options"
require "oribi/bench/options"
require "oribi/tune/server"

module Oribi
  module Tune
    class UsageError < StandardError; end

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

    LIST = Options::Type.new(arg: "LIST", cli: ->(x) { Tune.list(x) }, show: ->(v) { v.join(",") })
    SIZE = Options::Type.new(arg: "SIZE", cli: ->(x) { Tune.size(x) })
    PERCENT = Options::Type.new(arg: "PCT", pattern: Float, cli: ->(x) { x / 100 }, show: ->(v) { format("%g", v * 100) })

    # `oribi tune`'s options: docs/TUNE.md says more of each. -w and -t are
    # the server's (its -w/--workers, -t/--threads), swept; bench's
    # -T/--threads is the load generator's.
    OPTIONS = ToolOptions.new do
      option :workers, "-w", "--workers LIST", "worker counts: 1..4 or 1,2,4",
             type: LIST, default: Options.computed("1..CPUs") { (1..Etc.nprocessors).to_a }
      option :threads, "-t", "--threads LIST", "threads per worker: 1..4 or 1,2,4 (1 with --server unicorn)",
             type: LIST, default: [1, 2, 4, 8, 16].freeze
      option :slo, "--slo SLO", "latency objective: p50, p90, p95, p99 or p99.9 =TIME (ms, s, us), comma-joined",
             default: "p99=200ms"
      option :path, "--path PATH", "request path, with query", default: "/"
      headers
      targets
      duration "each probe at one rate", default: 5.0
      warmup "discarded run after each boot, and the length of each capacity run", default: 2.0
      option :repeat, "--repeat N", "closed-loop capacity runs per setting, for its spread; 2 at least",
             type: Options::INT, default: 3
      option :steps, "--steps N", "probes per setting at most", type: Options::INT, default: 8
      option :tolerance, "--tolerance PCT", "stop bisecting when the bracket is this narrow, %",
             type: PERCENT, default: 0.05
      option :quick, "--quick", "short probes for a first look or a test: -d 1s --warmup 500ms --steps 5 " \
                                "--tolerance 10; flags given win", type: Options::BOOL
      option :memory_limit, "--memory-limit SIZE", "exclude settings whose RSS (master + workers) exceeds SIZE: " \
                                                   "512M, 2G", type: SIZE, default: Options.unset("none")
      option :environment, "-E", "--env ENV", "RACK_ENV of the servers started", default: "production"
      option :server, "--server NAME", "the server started per setting: oribi, puma (-w W -t T:T), " \
                                       "unicorn (worker_processes W; threads 1)",
             type: Options.one_of(*Server::KINDS), default: "oribi"
      option :apply, "--apply CMD", "per setting, run CMD ({workers}, {threads} replaced), then probe --url or " \
                                    "--unix-socket", default: Options.unset("none")
      option :url, "--url URL", "a server already running at URL: the rate search only (a sweep with --apply)"
      option :unix, "--unix-socket PATH", "a server already running on unix socket PATH: the rate search only (a sweep " \
                                   "with --apply)"
      report_format(%w[text json])
      option :html, "--html FILE", "also write the HTML report (table and plots) to FILE"
      # A DIR, written at the end; bench's --output is a FILE of results
      # written as its run goes.
      option :output, "-o", "--output DIR", "also write DIR/tune.txt, DIR/tune.json and DIR/tune.html"
    end

    # What --quick sets, unless given.
    QUICK = { duration: 1.0, warmup: 0.5, steps: 5, tolerance: 0.1 }.freeze
  end
end
