# frozen_string_literal: true

module Oribi
  # Error and lifecycle messages, one line each, to stderr (or stderr_path),
  # in log_format: `text` ("oribi[PID]: message", a backtrace on the lines
  # after it), or one line per event for a platform to read, `json` or
  # `ltsv`, with the time (UTC), level, pid, worker (its index; none in the
  # master) and message, and for an exception its class and message and
  # its backtrace. The C loop's own lines (ext/oribi/loop/log.c) follow the
  # same format. Each line is one write to an unbuffered stream.
  module Log
    FORMATS = { "text" => 0, "json" => 1, "ltsv" => 2 }.freeze

    @format = "text"
    @worker = nil

    class << self
      attr_reader :format, :worker

      # The format from the config: log_format, else the access log's when
      # it is json or ltsv, else text. Tells the C loop too.
      def setup(config)
        @format = config[:log_format] || (%w[json ltsv].include?(config[:access_log_format]) ? config[:access_log_format] : "text")
        if @format != "text" # not at every boot: only these formats need them
          require "json"
          require "time"
        end
        Oribi.log_setup(FORMATS.fetch(@format), @worker)
      end

      # In a worker: its index, on every line from now on.
      def worker=(index)
        @worker = index
        Oribi.log_setup(FORMATS.fetch(@format), index)
      end
    end

    module_function

    def info(msg)
      emit("info", msg)
    end

    def error(msg, exc = nil)
      emit("error", msg, exc)
    end

    def emit(level, msg, exc = nil)
      $stderr.write(line(level, msg, exc))
    end

    def line(level, msg, exc)
      case Log.format
      when "json" then "#{JSON.generate(record(level, msg, exc))}\n"
      when "ltsv" then "#{record(level, msg, exc).map { |k, v| "#{k}:#{ltsv(v)}" }.join("\t")}\n"
      else text(msg, exc)
      end
    end

    def record(level, msg, exc)
      r = { time: Time.now.utc.iso8601(3), level: level, pid: Process.pid, worker: Log.worker, msg: msg }
      r.merge!(error: "#{exc.class}: #{exc.message}", backtrace: exc.backtrace || []) if exc
      r
    end

    # A field that neither ends the line nor starts another.
    def ltsv(value)
      value = value.join(" | ") if value.is_a?(Array)
      return "-" if value.nil?

      value.to_s.gsub(/[\x00-\x1f\x7f\\]/) { |c| format("\\x%02x", c.ord) }
    end

    def text(msg, exc)
      line = +"oribi[#{Process.pid}]: #{msg}"
      if exc
        line << ": #{exc.class}: #{exc.message}"
        (exc.backtrace || []).each { |l| line << "\n    " << l }
      end
      line << "\n"
    end

    # Points stdout/stderr at their configured files (again, after a log
    # rotation: USR1).
    def reopen(config)
      { $stdout => config[:stdout_path], $stderr => config[:stderr_path] }.each do |io, path|
        next unless path

        io.reopen(path, "a")
        io.sync = true
      end
    end
  end
end
