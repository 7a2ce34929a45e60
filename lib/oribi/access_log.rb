# frozen_string_literal: true

require "json"
require "time"

module Oribi
  # One line per request, in Apache's combined format, LTSV or JSON. Off
  # unless --access-log is given; written by the worker after the response.
  class AccessLog
    def initialize(path, format)
      @path = path
      @format = format
      open_file
    end

    def reopen
      @io.close unless @io == $stderr || @io == $stdout
      open_file
    end

    def log(env, status, headers, started)
      now = Time.now
      f = fields(env, status, headers, now, now - started)
      @io.write(line(f))
    end

    private

    def open_file
      @io = @path.nil? || @path == "-" ? $stderr : File.open(@path, "a")
      @io.sync = true
    end

    def fields(env, status, headers, now, duration)
      query = env["QUERY_STRING"].to_s
      {
        host: env["REMOTE_ADDR"] || "-",
        time: now,
        method: env["REQUEST_METHOD"],
        uri: query.empty? ? env["PATH_INFO"] : "#{env['PATH_INFO']}?#{query}",
        protocol: env["SERVER_PROTOCOL"],
        status: status.to_i,
        size: (headers.is_a?(Hash) && headers["content-length"]) || "-",
        referer: env["HTTP_REFERER"] || "-",
        ua: env["HTTP_USER_AGENT"] || "-",
        duration: duration,
      }
    end

    def line(f)
      case @format
      when "ltsv"
        "host:#{f[:host]}\ttime:#{f[:time].iso8601}\tmethod:#{f[:method]}\turi:#{clean(f[:uri])}\t" \
          "protocol:#{f[:protocol]}\tstatus:#{f[:status]}\tsize:#{f[:size]}\t" \
          "referer:#{clean(f[:referer])}\tua:#{clean(f[:ua])}\treqtime:#{format('%.6f', f[:duration])}\n"
      when "json"
        JSON.generate(f.merge(time: f[:time].iso8601(3), duration: f[:duration].round(6))) << "\n"
      else
        %(#{f[:host]} - - [#{f[:time].strftime('%d/%b/%Y:%H:%M:%S %z')}] ) +
          %("#{f[:method]} #{clean(f[:uri])} #{f[:protocol]}" #{f[:status]} #{f[:size]} ) +
          %("#{clean(f[:referer])}" "#{clean(f[:ua])}"\n)
      end
    end

    # No field may end the line or fake another field.
    def clean(s) = s.to_s.gsub(/[\x00-\x1f\x7f"\\]/) { |c| format("\\x%02x", c.ord) }
  end
end
