# frozen_string_literal: true

module Oribi
  # Error and lifecycle messages, one line each, to stderr (or stderr_path),
  # in log_format: `text` ("oribi[PID]: message", a backtrace on the lines
  # after it), or one line per event for a platform to read, `json` or
  # `ltsv`, with the time (UTC), level, pid, worker (its index; none in the
  # master) and message, and for an exception its class and message and
  # its backtrace. The C loop's own lines (ext/oribi/loop/log.c) follow the
  # same format. Each line is one write to an unbuffered stream.
  #
  # Messages carry request bytes (paths, header values, an app's error
  # about them), which are bytes, not text: every value is written through
  # Log.utf8 (JSON, then with every character past ASCII as \uXXXX) or
  # Log.ascii (text, LTSV), so a line is ASCII and valid in its format
  # whatever a client sent, and writing it never raises. ASCII as nginx
  # writes its logs: a code point that ends a line for some readers (NEL,
  # U+2028, U+2029), starts a terminal's control sequence (CSI) or turns
  # text around (U+202E) must not reach them raw.
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

    # backtrace: lines that say where (an exception's come with it)
    def info(msg, backtrace: nil)
      emit("info", msg, nil, backtrace)
    end

    def error(msg, exc = nil)
      emit("error", msg, exc)
    end

    def emit(level, msg, exc = nil, backtrace = nil)
      $stderr.write(line(level, msg, exc, backtrace))
    end

    def line(level, msg, exc, backtrace = nil)
      case Log.format
      when "json" then "#{JSON.generate(record(level, msg, exc, backtrace), ascii_only: true)}\n"
      when "ltsv" then "#{record(level, msg, exc, backtrace).map { |k, v| "#{k}:#{ltsv(v)}" }.join("\t")}\n"
      else text(msg, exc, backtrace)
      end
    rescue StandardError => e # a bug here must not take the caller down, nor lose the event
      "#{JSON.generate({ level: level, pid: Process.pid, msg: msg.inspect, log_error: e.inspect })}\n"
    end

    def record(level, msg, exc, backtrace)
      r = { time: Time.now.utc.iso8601(3), level: level, pid: Process.pid, worker: Log.worker, msg: utf8(msg) }
      r[:error] = utf8("#{exc.class}: #{exc.message}") if exc
      backtrace ||= exc&.backtrace || [] if exc
      r[:backtrace] = backtrace.map { |l| utf8(l) } if backtrace
      r
    end

    # A thread of the server's own whose failure is an event like any other:
    # logged in the log's format (not Ruby's plain-text report), and for a
    # watchdog, which must outlive any one request's bytes, run again.
    def thread(name, restart: false, &block)
      Thread.new do
        Thread.current.report_on_exception = false
        begin
          block.call
        rescue SystemExit, SignalException
          raise
        rescue Exception => e # rubocop:disable Lint/RescueException
          Log.error("the #{name} thread failed#{'; it starts again' if restart}", e)
          retry if restart
        end
      end
    end

    # Bytes as text: valid UTF-8 kept as it is; every other byte, and the
    # backslash, written as \xNN (lowercase hex), so that an escape in a
    # line always stands for a byte that came in. Plain ASCII (most values)
    # is returned as it is.
    def utf8(value)
      s = value.to_s
      return s if s.ascii_only? && !s.include?("\\")

      s = s.b.force_encoding(Encoding::UTF_8)
      s = s.gsub("\\", "\\x5c") if s.include?("\\")
      s.valid_encoding? ? s : s.scrub { |bytes| bytes.unpack("C*").map { |b| Kernel.format("\\x%02x", b) }.join }
    end

    # Bytes as ASCII: every byte past it, and the backslash, as \xNN (valid
    # UTF-8 too: "café" is "caf\xc3\xa9"), as nginx and Apache write them.
    def ascii(value)
      s = value.to_s
      return s if s.ascii_only? && !s.include?("\\")

      s.b.gsub(/[\\\x80-\xff]/n) { |c| Kernel.format("\\x%02x", c.ord) }.force_encoding(Encoding::UTF_8)
    end

    # Control bytes as \xNN too: what a format that ends a line or a field
    # at one of them needs.
    def one_line(value) = ascii(value).gsub(/[\x00-\x1f\x7f]/) { |c| Kernel.format("\\x%02x", c.ord) }

    # A field that neither ends the line nor starts another.
    def ltsv(value)
      value = value.join(" | ") if value.is_a?(Array)
      return "-" if value.nil?

      one_line(value)
    end

    # "oribi[PID]: message", and what goes with it on lines of its own that
    # start with four spaces: no message, however it was made, starts a
    # line that looks like another's.
    def text(msg, exc, backtrace)
      line = +"oribi[#{Process.pid}]: #{indented(msg)}"
      line << ": #{indented("#{exc.class}: #{exc.message}")}" if exc
      (backtrace || exc&.backtrace || []).each { |l| line << "\n    " << indented(l) }
      line << "\n"
    end

    def indented(value) = ascii(value).gsub(/[\x00-\x08\x0b-\x1f\x7f]/) { |c| Kernel.format("\\x%02x", c.ord) }.gsub("\n", "\n    ")

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
