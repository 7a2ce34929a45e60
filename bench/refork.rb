# frozen_string_literal: true

# Memory per worker with and without refork, for an app that warms up
# lazily: its first request builds a large frozen table (~300k strings).
#
#   bundle exec rake compile
#   bundle exec ruby bench/refork.rb [--workers 4] [--refork-after 100]
#
# Each setting runs its own Oribi (unix socket, control endpoint for
# /stats) under Oribi::Loadgen until every worker has served (and so built
# or inherited the table) — with refork, until every worker is one the mold
# forked — then reads Rss and Pss of each process from
# /proc/PID/smaps_rollup. Pss divides shared pages among the processes that
# share them: the sum of Pss is the memory the server really takes.
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../oribi-bench/lib", __dir__))
require "oribi"
require "oribi/loadgen"
require "oribi/tune/resources"
require "fileutils"
require "json"
require "optparse"
require "socket"
require "tmpdir"

module Bench
  class Refork
    ROOT = File.expand_path("..", __dir__)
    APP = <<~RUBY
      # The first request of each process builds the table (lazily, as caches do).
      run lambda { |env|
        $table ||= Array.new(300_000) { |i| "key-\#{i}-\#{'x' * 40}".freeze }.freeze
        [200, { "content-type" => "text/plain" }, ["\#{$table.size}\\n"]]
      }
    RUBY

    def initialize(argv)
      @workers = 4
      @refork_after = 100
      OptionParser.new do |o|
        o.on("--workers N", Integer) { |v| @workers = v }
        o.on("--refork-after N", Integer) { |v| @refork_after = v }
      end.parse!(argv)
      @tmp = Dir.mktmpdir("oribi-refork-", "/tmp")
      @app = File.join(@tmp, "app.ru")
      File.write(@app, APP)
    end

    def run
      rows = []
      rows += measure("no refork", [])
      rows += measure("refork_after #{@refork_after}", ["--refork-after", @refork_after.to_s])
      puts
      puts "| setting | process | generation | served | RSS MB | PSS MB |"
      puts "|---|---|---|---|---|---|"
      rows.each { |r| puts r }
    ensure
      FileUtils.rm_rf(@tmp)
    end

    private

    def measure(label, args)
      sock = File.join(@tmp, "s.sock")
      control = File.join(@tmp, "c.sock")
      log = File.join(@tmp, "server.log")
      pid = Process.spawn({ "RACK_ENV" => "production" }, RbConfig.ruby, File.join(ROOT, "exe/oribi"), "-w", @workers.to_s,
                          "-b", "unix://#{sock}", "--control", "unix://#{control}", "--rolling-interval", "0", *args, @app,
                          pgroup: true, out: log, err: log)
      wait_for { File.socket?(control) && File.socket?(sock) }
      refork = args.any?
      s = nil
      rounds = 0
      wait_for(60) do
        Oribi::Loadgen.run(unix_path: sock, request: "GET / HTTP/1.1\r\nHost: b\r\n\r\n", threads: 1,
                           connections: @workers * 2, duration: 0.5, keepalive: false)
        rounds += 1
        $stderr.write("\r\e[K#{label}: #{rounds * 0.5}s of load, waiting for every worker to have served")
        s = stats(control)
        serving = s["workers"].reject { |w| w["mold"] || w["retiring"] }
        serving.size == @workers && serving.all? { |w| w["served"].positive? && (!refork || w["generation"] >= 1) }
      end
      $stderr.write("\r\e[K")
      procs = s["workers"].reject { |w| w["retiring"] && !w["mold"] }
      mem = procs.map { |w| [w, smaps(w["pid"])] }
      master = smaps(pid)
      total_pss = mem.sum { |_, m| m[:pss] } + master[:pss]
      puts format("%-22s PSS of workers, mold and master: %s MB", label, mb(total_pss))
      rows = mem.map do |w, m|
        role = w["mold"] ? "mold" : "worker[#{w['index']}]"
        "| #{label} | #{role} | #{w['generation']} | #{w['served']} | #{mb(m[:rss])} | #{mb(m[:pss])} |"
      end
      rows << "| #{label} | master | | | #{mb(master[:rss])} | #{mb(master[:pss])} |"
      rows << "| #{label} | **total** | | | | **#{mb(total_pss)}** |"
    ensure
      if pid
        Process.kill(:TERM, pid)
        Process.wait(pid)
      end
    end

    def mb(bytes) = format("%.1f", bytes / 1048576.0)

    def smaps(pid) = Oribi::Tune::Resources.memory(pid) || raise("process #{pid} is gone")

    def stats(control)
      s = UNIXSocket.new(control)
      s.write("GET /stats HTTP/1.1\r\nHost: b\r\n\r\n")
      JSON.parse(s.read.split("\r\n\r\n", 2).last)
    ensure
      s&.close
    end

    def wait_for(timeout = 20)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
      until yield
        raise "timed out" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

        sleep 0.1
      end
    end
  end
end

Bench::Refork.new(ARGV).run if $PROGRAM_NAME == __FILE__
