# frozen_string_literal: true

# A graceful stop under load, Oribi against its peers in one run:
#
#   bundle exec ruby bench/drain.rb [--queued 20,50,200] [--keepalive 4] [--repeat 1]
#                                   [--servers oribi,puma] [--via direct,nginx]
#
# bench/apps/sleepy.ru (each request waits ?ms=N), 2 workers x 1 thread on a
# unix socket, directly or behind nginx (upstream keepalive 32). KEEPALIVE
# keep-alive clients keep both workers busy; QUEUED clients then send one
# request each (they wait in the backlog), and the server gets TERM. Counts
# how many of the queued requests got a complete 200, and how the workers
# shared them. Every one should: they reached the server before it stopped.
require_relative "scenario"
require "optparse"

module Bench
  class Drain
    APP_MS = { 20 => 300, 50 => 100, 200 => 20 }.freeze # keeps each drain a few seconds

    def initialize(opts)
      @o = opts
    end

    def run
      puts "sleepy.ru, #{Scenario::WORKERS} workers x 1 thread, #{@o[:keepalive]} keep-alive clients busy, then TERM"
      puts format("%-14s %7s %9s %10s %s", "server", "queued", "answered", "seconds", "split by worker")
      @o[:repeat].times do
        @o[:via].each do |via|
          @o[:queued].each do |n|
            @o[:servers].each { |name| print_row(measure(name, via, n)) }
          end
        end
      end
    end

    private

    def measure(name, via, queued)
      ms = APP_MS.fetch(queued) { 20 }
      sc = Scenario.new(name, "sleepy.ru", via: via)
      stop = false
      busy = Array.new(@o[:keepalive]) { keepalive_client(sc, ms, -> { stop }) }
      sleep 2 * ms / 1000.0 # the busy clients are in the app (a few rounds in)
      clients = Array.new(queued) { |i| send_one(sc, "/?ms=#{ms}&n=#{i}") }
      t = now
      Process.kill(:TERM, sc.pid)
      bodies = clients.map { |s| s && read_body(s) }
      stop = true
      busy.each { |th| th.join(5) }
      { label: sc.label, queued: queued, answered: bodies.count { |b| b&.start_with?("ok") },
        seconds: now - t, split: bodies.compact.map { |b| b.split[1] }.tally.values.sort.reverse }
    ensure
      stop = true
      sc&.stop
    end

    def keepalive_client(sc, ms, stop)
      Thread.new do
        s = sc.connect
        until stop.call
          s.write("GET /?ms=#{ms} HTTP/1.1\r\nHost: localhost\r\n\r\n")
          body = read_body(s, keep: true) or break
          break if body.include?("close")
        end
      rescue SystemCallError, IOError
        nil
      ensure
        s&.close
      end
    end

    def send_one(sc, path)
      sc.connect.tap { |s| s.write("GET #{path} HTTP/1.1\r\nHost: localhost\r\n\r\n") }
    rescue SystemCallError
      nil
    end

    # The body of one response ("ok PID"), "close" appended when the server
    # said so; nil when the connection ended first. keep: leave it open.
    def read_body(s, keep: false)
      buf = +""
      deadline = now + 30
      until (head_end = buf.index("\r\n\r\n"))
        return nil unless (chunk = read_some(s, deadline))

        buf << chunk
      end
      len = buf[/^content-length:\s*(\d+)/i, 1].to_i
      while buf.bytesize < head_end + 4 + len
        return nil unless (chunk = read_some(s, deadline))

        buf << chunk
      end
      body = buf[head_end + 4, len]
      body += " close" if buf[0, head_end].match?(/^connection:\s*close/i)
      body
    ensure
      s.close unless keep
    end

    def read_some(s, deadline)
      return nil unless s.wait_readable([deadline - now, 0].max)

      s.read_nonblock(65_536, exception: false).then { |c| c.is_a?(String) ? c : nil }
    rescue SystemCallError, IOError
      nil
    end

    def print_row(r)
      puts format("%-14s %7d %9d %10.2f %s", r[:label], r[:queued], r[:answered], r[:seconds], r[:split].join("/"))
    end

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end

if $PROGRAM_NAME == __FILE__
  opts = { queued: [20, 50, 200], keepalive: 4, repeat: 1, servers: %w[oribi puma], via: %w[direct nginx] }
  OptionParser.new do |o|
    o.on("--queued LIST", Array) { |v| opts[:queued] = v.map { |x| Integer(x, 10) } }
    o.on("--keepalive N", Integer) { |v| opts[:keepalive] = v }
    o.on("--repeat N", Integer) { |v| opts[:repeat] = v }
    o.on("--servers LIST", Array) { |v| opts[:servers] = v }
    o.on("--via LIST", Array) { |v| opts[:via] = v }
  end.parse!
  Bench::Drain.new(opts).run
end
