# frozen_string_literal: true

module Oribi
  # Error and lifecycle messages, one line each, to stderr (or stderr_path).
  module Log
    module_function

    def info(msg)
      $stderr.write("oribi[#{Process.pid}]: #{msg}\n")
    end

    def error(msg, exc = nil)
      line = +"oribi[#{Process.pid}]: #{msg}"
      if exc
        line << ": #{exc.class}: #{exc.message}"
        (exc.backtrace || []).each { |l| line << "\n    " << l }
      end
      $stderr.write(line << "\n")
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
