# frozen_string_literal: true

require "ipaddr"
require "json"
require "time"

module Oribi
  # One line per request, in Apache's combined format, LTSV or JSON. Off
  # unless --access-log is given; written by the worker after the response.
  class AccessLog
    # Hops of X-Forwarded-For examined, from the right: more trusted proxies
    # than this in a row is no deployment, and each hop costs an address
    # parse, which a client writing thousands of hops would multiply.
    MAX_HOPS = 16

    # trusted: the proxies (addresses, CIDR ranges) whose X-Forwarded-For
    # names the client.
    def initialize(path, format, trusted = [])
      @path = path
      @format = format
      @trusted = trusted.map { |a| IPAddr.new(a) }
      open_file
    end

    def reopen
      @io.close unless @io == $stderr || @io == $stdout
      open_file
    end

    # sent: the body bytes the server wrote. status nil: a full hijack,
    # whose answer was the app's to write (Rails returns -1 then): the
    # server cannot tell it, and writes `-` (JSON null) rather than the
    # status the app returned.
    def log(env, status, sent, started)
      now = Time.now
      f = fields(env, status, sent, now, now - started)
      @io.write(line(f))
    end

    private

    def open_file
      @io = @path.nil? || @path == "-" ? $stderr : File.open(@path, "a")
      @io.sync = true
    end

    def fields(env, status, sent, now, duration)
      query = env["QUERY_STRING"].to_s
      {
        host: client(env),
        time: now,
        # the method sent, not Rack::MethodOverride's (_method=DELETE)
        method: env["rack.methodoverride.original_method"] || env["REQUEST_METHOD"],
        uri: query.empty? ? env["PATH_INFO"] : "#{env['PATH_INFO']}?#{query}",
        protocol: env["SERVER_PROTOCOL"],
        status: status&.to_i,
        size: sent.to_i.positive? ? sent : "-", # as Apache's %b
        referer: env["HTTP_REFERER"] || "-",
        ua: env["HTTP_USER_AGENT"] || "-",
        duration: duration,
      }
    end

    # The peer, or behind trusted proxies the nearest address in
    # X-Forwarded-For that is not one of them (the leftmost of MAX_HOPS
    # when all are). The field is the client's to write: a hop that is not
    # an address ends the walk, and the nearest trusted hop that reported it
    # is named. Walked from the right, so that the bytes left of the hops
    # examined are never looked at (as nginx's real_ip does).
    def client(env)
      peer = env["REMOTE_ADDR"] || "-"
      forwarded = env["HTTP_X_FORWARDED_FOR"]
      return peer if forwarded.nil? || !trusted?(peer)

      last = peer
      each_hop_from_the_right(forwarded.b) do |hop|
        ip = address(hop) or return last
        return hop unless trusted?(ip)

        last = hop
      end
      last
    end

    def each_hop_from_the_right(list)
      hops = 0
      stop = list.bytesize
      while stop.positive? && hops < MAX_HOPS
        comma = list.rindex(",", stop - 1)
        hop = list.byteslice((comma ? comma + 1 : 0)...stop).strip
        stop = comma || 0
        next if hop.empty?

        hops += 1
        yield hop
      end
    end

    # An IPv4 or IPv6 address alone (no prefix, port, name or garbage), or nil.
    def address(text)
      return nil unless text.match?(/\A[0-9a-fA-F.:]{2,45}\z/)

      IPAddr.new(text)
    rescue IPAddr::Error
      nil
    end

    def trusted?(addr)
      ip = addr.is_a?(IPAddr) ? addr : address(addr)
      ip && @trusted.any? { |net| net.include?(ip) }
    end

    def line(f)
      case @format
      when "ltsv"
        "host:#{clean(f[:host])}\ttime:#{f[:time].iso8601}\tmethod:#{clean(f[:method])}\turi:#{clean(f[:uri])}\t" \
          "protocol:#{clean(f[:protocol])}\tstatus:#{f[:status] || '-'}\tsize:#{f[:size]}\t" \
          "referer:#{clean(f[:referer])}\tua:#{clean(f[:ua])}\treqtime:#{format('%.6f', f[:duration])}\n"
      when "json"
        JSON.generate(f.merge(time: f[:time].iso8601(3), duration: f[:duration].round(6)).transform_values do |v|
          v.is_a?(String) ? Log.utf8(v) : v
        end, ascii_only: true) << "\n"
      else
        %(#{clean(f[:host])} - - [#{f[:time].strftime('%d/%b/%Y:%H:%M:%S %z')}] ) +
          %("#{clean(f[:method])} #{clean(f[:uri])} #{clean(f[:protocol])}" #{f[:status] || '-'} #{f[:size]} ) +
          %("#{clean(f[:referer])}" "#{clean(f[:ua])}"\n)
      end
    end

    # No field may end the line or fake another field: every text field is
    # escaped alike (status, size and times are numbers we make), as ASCII
    # (Log.ascii).
    def clean(s) = Log.one_line(s).gsub('"', "\\x22")
  end
end
