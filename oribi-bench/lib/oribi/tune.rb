# frozen_string_literal: true

require "optparse"
require "uri"
require "etc"
require "fileutils"
require "oribi/extension"
require "oribi/loadgen"
require "oribi/bench"
require "oribi/tune/options"
require "oribi/tune/slo"
require "oribi/tune/session"
require "oribi/tune/report"
require "oribi/tune/plot"

module Oribi
  # `oribi tune [options] RACKUP_FILE`: for each workers × threads setting,
  # start the app, warm it up, bisect the highest open-loop rate that meets
  # the SLO, record CPU and memory (Tune::Session runs that); then a table
  # and a recommendation (or JSON, --json), and the files asked for.
  # docs/TUNE.md describes the method and every option.
  module Tune
    # The command line: parses, runs a Session, reports.
    class CLI
      def self.run(argv, out: $stdout, err: $stderr) = new(out, err).run(argv)

      BOOT_TIMEOUT = 60.0 # seconds a server may take to answer

      def initialize(out, err)
        @out = out
        @err = err
      end

      # 0: a recommendation; 1: no setting met the SLO (or the run failed);
      # 2: bad flags.
      def run(argv)
        o = parse(argv.dup)
        @err.puts estimate(o)
        run = Session.new(o, @err).run
        write(o, run)
        @out.write(report(o, run))
        Report.recommendation(run) ? 0 : 1
      rescue OptionParser::ParseError, UsageError, Bench::UsageError, SLO::Error, URI::Error => e
        @err.puts "oribi tune: #{e.message.lines.first.chomp}"
        2
      rescue Loadgen::Error, SystemCallError => e
        @err.puts "oribi tune: #{e.message.lines.first.chomp}"
        1
      end

      def parse(argv)
        v = OPTIONS.defaults.merge(boot_timeout: BOOT_TIMEOUT)
        given = []
        parser = OptionParser.new(
          "Usage: oribi tune [options] RACKUP_FILE\n" \
          "       oribi tune [options] --url URL | --unix-socket PATH   (a running server: the rate search only)\n" \
          "       oribi tune [options] --apply CMD --url URL | --unix-socket PATH   (CMD applies each setting)\n\n" \
          "Starts the app for each workers × threads setting, finds the highest rate meeting the SLO\n" \
          "(bisection), and recommends a setting. The total time is estimated when it starts\n" \
          "(defaults: #{Etc.nprocessors} × 5 settings of about 55 s each, #{minutes(Etc.nprocessors * 5 * 55)}). " \
          "See docs/TUNE.md.\n\n"
        )
        OPTIONS.define(parser, v, given)
        parser.parse!(argv)
        v.merge!(QUICK.except(*given)) if v.delete(:quick) # flags given win over --quick
        external = v[:url] || v[:unix]
        expected = external ? 0 : 1
        if given.include?(:json) && argv.size == expected + 1 # the old --json FILE: say what it is now
          raise UsageError, "--json takes no FILE: it prints the JSON report; -o DIR writes DIR/tune.json"
        end
        raise UsageError, "one RACKUP_FILE expected (oribi tune --help)" unless argv.size == expected
        raise UsageError, "--url or --unix-socket, not both" if v[:url] && v[:unix]
        raise UsageError, "--apply needs --url or --unix-socket (where to probe)" if v[:apply] && !external
        raise UsageError, "--server starts the app: give a RACKUP_FILE, not --url or --unix-socket" if external && v[:server] != "oribi"

        v[:threads] = [1] if v[:server] == "unicorn" && !given.include?(:threads)

        v[:rackup] = argv[0]
        raise UsageError, "no such file: #{v[:rackup]}" if v[:rackup] && !File.file?(v[:rackup])

        check(v)
        v[:slo] = SLO.parse(v[:slo])
        if v[:targets]
          raise UsageError, "no such file: #{v[:targets]}" unless File.file?(v[:targets])

          v[:target_list] = Bench::Targets.load(v[:targets])
        end
        v
      end

      def check(v)
        raise UsageError, "--duration must be positive" unless v[:duration].positive?
        raise UsageError, "--warmup must be positive" unless v[:warmup].positive?
        raise UsageError, "--steps must be at least 2" unless v[:steps] >= 2
        raise UsageError, "--repeat must be at least 2 (a spread needs two runs)" unless v[:repeat] >= 2
        raise UsageError, "--tolerance must be between 0 and 100" unless v[:tolerance].positive? && v[:tolerance] < 1
        raise UsageError, "--path must start with /" unless v[:path].start_with?("/")
        raise UsageError, "--threads at most 1024" if v[:threads].max > 1024
        raise UsageError, "unicorn runs one thread per worker: -t 1" if v[:server] == "unicorn" && v[:threads] != [1]
        v[:headers].each do |h|
          raise UsageError, "bad header #{h.inspect} (NAME: VALUE)" unless h.match?(Bench::Targets::HEADER)
        end
      end

      # The line a run starts with: what it measures, and for how long at most.
      def estimate(o)
        n = Session.settings(o).size
        format("oribi tune: %d setting%s × (boot, %gs warm-up, %d × %gs capacity, ≤ %d probes of %gs): about %s",
               n, n == 1 ? "" : "s", o[:warmup], o[:repeat], o[:warmup], o[:steps], o[:duration], minutes(Session.seconds(o)))
      end

      def minutes(s) = s < 90 ? "#{s.round} s" : "#{(s / 60.0).round} min"

      # What goes to stdout: the text report, or with --json the JSON one.
      def report(o, run) = o[:format] == "json" ? Report.json(run) : Report.text(run)

      def write(o, run)
        if o[:output]
          FileUtils.mkdir_p(o[:output])
          File.write(File.join(o[:output], "tune.txt"), Report.text(run))
          File.write(File.join(o[:output], "tune.json"), Report.json(run))
          File.write(File.join(o[:output], "tune.html"), Plot.html(run, title: title(o)))
        end
        File.write(o[:html], Plot.html(run, title: title(o))) if o[:html]
      end

      def title(o) = "oribi tune #{o[:rackup] || o[:url] || o[:unix]}#{" on #{o[:server]}" unless o[:server] == 'oribi'} (#{o[:slo]})"
    end
  end
end
