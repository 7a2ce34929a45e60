# frozen_string_literal: true

module Oribi
  # Error and lifecycle messages, one line each, to stderr.
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
  end
end
