# frozen_string_literal: true

# kill -9 of one worker under keep-alive load: how many requests fail, and
# whether they are only the ones on the victim's connections.
#
#   bundle exec ruby bench/kill_worker.rb [--clients 20] [--servers oribi,puma] [--repeat 3]
#
# bench/apps/sleep.ru (10 ms), 2 workers x 1 thread on a unix socket;
# CLIENTS keep-alive clients send in a loop (a failed one reconnects); after
# 1 s one worker gets SIGKILL, 2 s later the load stops.
require_relative "scenario"
require "oribi/tune/resources"
require "optparse"

module Bench
  module KillWorker
    module_function

    def run(name, clients)
      sc = Scenario.new(name, "sleep.ru")
      stop = false
      ok = Queue.new
      failed = Queue.new
      load = Array.new(clients) { Thread.new { client(sc, -> { stop }, ok, failed) } }
      sleep 1
      Process.kill(:KILL, Oribi::Tune::Resources.children(sc.pid).first)
      sleep 2
      stop = true
      load.each(&:join)
      puts format("%-8s %d clients: %d served, %d failed", name, clients, ok.size, failed.size)
    ensure
      stop = true
      sc&.stop
    end

    def client(sc, stop, ok, failed)
      s = sc.connect
      until stop.call
        begin
          s.write(sc.request)
          head = s.gets("\r\n\r\n") or raise EOFError
          ok << s.read(head[/content-length:\s*(\d+)/i, 1].to_i)
        rescue SystemCallError, IOError
          failed << 1
          s.close
          s = sc.connect
        end
      end
    ensure
      s&.close
    end
  end
end

if $PROGRAM_NAME == __FILE__
  opts = { clients: 20, servers: %w[oribi], repeat: 3 }
  OptionParser.new do |o|
    o.on("--clients N", Integer) { |v| opts[:clients] = v }
    o.on("--servers LIST", Array) { |v| opts[:servers] = v }
    o.on("--repeat N", Integer) { |v| opts[:repeat] = v }
  end.parse!
  opts[:repeat].times { opts[:servers].each { |name| Bench::KillWorker.run(name, opts[:clients]) } }
end
