# frozen_string_literal: true

require "optparse"
require "uri"
require "etc"
require "oribi/loadgen"
require "oribi/bench/options"
require "oribi/bench/report"
require "oribi/bench/progress"
require "oribi/bench/plot"
require "oribi/bench/targets"
require "oribi/bench/threshold"
require "oribi/bench/results"
require "oribi/bench/hlog"
require "oribi/bench/report_command"

module Oribi
  # `oribi bench [options] URL`: a load generator over Oribi::Loadgen (C,
  # threads with their own epoll loops, run without the GVL). Options and
  # defaults are described once, in docs/BENCH.md.
  module Bench
    class UsageError < StandardError; end

    class CLI
      def self.run(argv, out: $stdout, err: $stderr) = new(out, err).run(argv)

      def initialize(out, err)
        @out = out
        @err = err
      end

      # 0: done with at least one response; 1: nothing answered, a
      # threshold failed (or the run could not start); 2: bad flags or URL.
      def run(argv)
        return ReportCommand.new(@out, @err).run(argv.drop(1)) if argv.first == "report"

        o = parse(argv.dup)
        writable!(o[:plot]) if o[:plot]
        output = Results.create(o[:output], url: o[:url], args: Results.shareable(argv)) if o[:output]
        result = attack(o[:run].merge(output_fd: output&.fileno).compact)
        Results.finish(output, result) if output
        lost = output_lost(o[:output], result)
        if o[:plot]
          File.write(o[:plot], Plot.html(result, interval: o[:run][:series_interval], title: "oribi bench #{o[:url]}"))
        end
        report(o, result) || lost ? 1 : 0
      rescue OptionParser::ParseError, UsageError, URI::Error, SystemCallError => e
        @err.puts "oribi bench: #{e.message.lines.first.chomp}"
        2
      rescue Loadgen::Error => e
        @err.puts "oribi bench: #{e.message.lines.first.chomp}"
        1
      end

      # Writes the report; whether it failed: a threshold, or nothing answered.
      def report(o, result)
        judged = Threshold.evaluate(o[:thresholds], result)
        @out.write(render(o[:format], result, judged, o[:hlog]))
        judged.any? { |_, _, ok| !ok } || (result[:requests].zero? && result[:errors].values.sum.positive?)
      end

      def output_lost(path, result)
        return false unless result[:output_errno]

        @err.puts "oribi bench: writing #{path} failed (#{SystemCallError.new(nil, result[:output_errno]).message}): " \
                  "it holds only the results before"
        true
      end

      # A plot the run could not write would lose the run's results: find
      # out before it starts, by creating the file.
      def writable!(path)
        File.open(path, "w") { nil }
      rescue SystemCallError => e
        raise UsageError, "cannot write #{path}: #{e.message.sub(/ @ .*/, '').sub(/ - .*/, '')}"
      end

      # Runs the load; a progress line when stderr is a terminal, and
      # Ctrl-C ends the run early with a report, as vegeta's does.
      def attack(run)
        progress = Progress.new(@err) if @err.respond_to?(:tty?) && @err.tty?
        stop = false
        old = trap("INT") { stop = true }
        Loadgen.run(run) do |done, failed|
          progress&.update(done, failed)
          stop ? :stop : nil
        end
      ensure
        trap("INT", old || "DEFAULT")
        progress&.finish
      end

      # The report, then how each threshold fared (in JSON, a key of it).
      # hlog: a Proc giving HdrHistogram's interval log.
      def render(format, result, judged = [], hlog = nil)
        case format
        when "json" then Report.json(result, thresholds: judged)
        when "hist" then Report.histogram(result) + Report.thresholds(judged)
        when "hlog" then hlog.call
        else Report.text(result) + Report.thresholds(judged)
        end
      end

      # Returns { run: options for Loadgen.run, format: }.
      def parse(argv)
        v = OPTIONS.defaults
        given = []
        parser = OptionParser.new("Usage: oribi bench [options] URL\n" \
                                  "       oribi bench report [options] FILE... (oribi bench report --help)")
        OPTIONS.define(parser, v, given)
        parser.parse!(argv)
        v.delete(:duration) unless Bench.default_duration?(v) || given.include?(:duration)
        raise UsageError, "one URL expected (oribi bench --help)" unless argv.size == (v[:targets] ? 0 : 1)
        check(v, given)
        targets = v[:targets] ? Targets.load(v[:targets]) : [single_target(argv[0], v)]
        run = run_options(targets, v)
        # About 300 points over the run for the plot, 100 ms at the finest.
        length = v[:stages] ? v[:stages].sum(&:last) : v[:duration]
        run[:series_interval] = length ? [(length / 300.0).round(3), 0.1].max : 1.0 if v[:plot]
        writable!(v[:output]) if v[:output]
        { run: run, format: v[:format], plot: v[:plot], url: argv[0] || v[:targets], thresholds: v[:thresholds],
          output: v[:output] }
      end

      private

      def check(v, given)
        raise UsageError, "-T must be at least 1" unless v[:threads] >= 1
        raise UsageError, "-c must be at least 1" unless v[:connections] >= 1
        raise UsageError, "--max-connections must be at least 1" unless v[:max_connections] >= 1
        if given.include?(:max_connections) && !v[:rate] && !v[:stages]
          raise UsageError, "--max-connections needs --rate (closed loop: -c)"
        end
        raise UsageError, "--warmup needs -d or rate stages (a duration)" if v[:warmup] && !v[:duration] && !v[:stages]
        raise UsageError, "rate stages set the duration: drop -d" if v[:stages] && given.include?(:duration)
        raise UsageError, "-n must be at least 1" if v[:requests] && v[:requests] < 1
        raise UsageError, "--timeout must be positive" unless v[:timeout].positive?
        raise UsageError, "-d must be positive" if v[:duration] && !v[:duration].positive?
        raise UsageError, "bad method #{v[:method].inspect}" unless v[:method].match?(Targets::TOKEN)

        v[:headers].each do |h|
          raise UsageError, "bad header #{h.inspect} (NAME: VALUE)" unless h.match?(Targets::HEADER)
        end
      end

      def single_target(url, v)
        uri = Targets.http_uri(url) or raise UsageError, "bad URL #{url.inspect}: http[s]://host:port/path expected"

        Targets::Target.new(method: v[:method], uri: uri, headers: [], body: v[:body])
      end

      def run_options(targets, v)
        uri = targets.first.uri
        if !v[:unix_path] && targets.any? { |t| [t.uri.host, t.uri.port] != [uri.host, uri.port] }
          raise UsageError, "targets must share one host and port (or use --unix-socket)"
        end
        raise UsageError, "targets must share one scheme, http or https" if targets.any? { |t| t.uri.scheme != uri.scheme }

        reqs = targets.map { |t| Targets.request(t, headers: v[:headers], keepalive: v[:keepalive]) }
        run = { request: reqs.size == 1 ? reqs[0] : reqs, threads: v[:threads],
                connections: v[:connections], keepalive: v[:keepalive], timeout: v[:timeout],
                duration: v[:duration], requests: v[:requests], rate: v[:rate], stages: v[:stages],
                max_connections: v[:max_connections], warmup: v[:warmup] }
        run.merge!(tls(uri, v)) if uri.scheme == "https"
        if v[:unix_path]
          run[:unix_path] = v[:unix_path]
        else
          run[:host] = uri.host.delete_prefix("[").delete_suffix("]")
          run[:port] = uri.port
        end
        run.compact
      end

      # https: TLS with SNI and the certificate checked for the URL's host
      # (or --sni), unless --insecure.
      def tls(uri, v)
        unless Loadgen::TLS
          raise UsageError, "https needs TLS, and this oribi bench was built without OpenSSL: " \
                            "install libssl-dev and rebuild (rake compile)"
        end

        { tls: true, server_name: v[:sni] || uri.host.delete_prefix("[").delete_suffix("]"), insecure: v[:insecure],
          tls_resume: v[:tls_resume] }
      end
    end
  end
end
