# frozen_string_literal: true

require "optparse"

module Oribi
  module Bench
    # `oribi bench report [options] FILE…`: any report of runs saved with
    # `--output`, from one file or several merged (runs made on several
    # hosts against one target, vegeta-style): text, JSON, hist, the plot,
    # thresholds, and HdrHistogram's interval log (`--format hlog`).
    class ReportCommand
      def initialize(out, err)
        @out = out
        @err = err
      end

      # Exit status as a run's: 1 when a threshold failed or nothing
      # answered, 2 for bad flags or files.
      def run(argv)
        v = REPORT_OPTIONS.defaults
        cli = CLI.new(@out, @err)
        files = REPORT_OPTIONS.define(OptionParser.new("Usage: oribi bench report [options] FILE..."), v).parse(argv)
        raise UsageError, "results files expected (oribi bench report --help)" if files.empty?
        raise UsageError, "--interval must be positive" unless v[:interval].positive?

        cli.writable!(v[:plot]) if v[:plot]
        result, acc = Results.merge(files, series: !v[:plot].nil?, hlog_interval: v[:format] == "hlog" ? v[:interval] : nil)
        if v[:plot]
          File.write(v[:plot], Plot.html(result, interval: result[:series_interval], title: "oribi bench report #{files.join(' ')}"))
        end
        v[:hlog] = -> { Hlog.render(acc, interval: v[:interval], start_unix_ns: result[:start_unix_ns]) }
        cli.report(v, result) ? 1 : 0
      rescue OptionParser::ParseError, UsageError, SystemCallError => e
        @err.puts "oribi bench report: #{e.message.lines.first.chomp}"
        2
      end
    end
  end
end
