# frozen_string_literal: true

# Workers x threads, Oribi and Puma side by side: an IO-bound app
# (bench/apps/sleep.ru, 10 ms per request: the ideal is workers x threads x 100
# req/s) at 1x1, 1x4, 2x4, 2x8, and a CPU-bound app (bench/apps/cpu.ru, ~2 ms of
# Ruby per request) at 2x1 and 2x4, where threads should cost nothing.
#
#   bundle exec rake compile
#   bundle exec ruby bench/threads.rb [--duration 5] [--servers oribi,puma]
#
# Closed loop over a unix socket with 2 connections per app thread (every
# thread has work, none is idle waiting for the client), each setting
# booted, warmed up (discarded), measured, stopped; lifecycle as in
# bench/compare.rb.
require_relative "compare"

module Bench
  class Threads < Compare
    SETTINGS = [
      ["sleep.ru", 1, 1], ["sleep.ru", 1, 4], ["sleep.ru", 2, 4], ["sleep.ru", 2, 8],
      ["cpu.ru", 2, 1], ["cpu.ru", 2, 4]
    ].freeze

    def run
      puts "#{@o.duration}s per setting (+#{@o.warmup}s warm-up), unix socket, closed loop, " \
           "2 connections per app thread"
      SETTINGS.each do |app, workers, threads|
        @setting = [app, workers, threads]
        @o.connections = 2 * workers * threads
        @o.servers.each { |name| measure(name) }
      end
      print_threads_table
    ensure
      FileUtils.rm_rf(@tmp)
    end

    private

    def command(name, addr)
      app, workers, threads = @setting
      path = File.join(ROOT, "bench", "apps", app)
      case name
      when "puma" then %W[bundle exec puma -e production -w #{workers} -t #{threads}:#{threads} -b #{addr[:uri]} #{path}]
      when "oribi" then %W[bundle exec ruby #{File.join(@o.oribi_root, 'exe', 'oribi')} -w #{workers} -t #{threads} -b #{addr[:uri]} #{path}]
      else abort "unknown server #{name} (known: oribi, puma)"
      end
    end

    def measure(name)
      addr = address(name)
      argv = command(name, addr)
      log = File.join(@tmp, "#{name}.log")
      env = { "RACK_ENV" => "production", "BUNDLE_GEMFILE" => File.join(ROOT, "Gemfile") }
      group = Suite::ProcessGroup.new(argv, env: env, log: log, chdir: ROOT)
      begin
        failed = group.wait_ready(addr[:target], request(false), timeout: BOOT_TIMEOUT)
        if failed
          @results << [name, @setting, nil]
          return unavailable_line(name, failed)
        end

        load_run(addr, true, @o.warmup) if @o.warmup.positive?
        result = load_run(addr, true, @o.duration)
        @results << [name, @setting, result]
        app, w, t = @setting
        puts format("  %-8s %-9s %dx%-3d %9.1f req/s  p99 %s", name, app, w, t, rate(result), ms(result[:latency][:p99]))
      ensure
        group.stop
        FileUtils.rm_f(addr[:path])
      end
    end

    def unavailable_line(name, why)
      puts "  #{name}: not available (#{why})"
    end

    # IO-bound: share of workers x threads x 100 req/s; CPU-bound: ratio
    # to the same server's 2x1.
    def vs_ideal(name, (app, workers, threads), r)
      return format("%.0f%% of %d", 100 * rate(r) / (workers * threads * 100), workers * threads * 100) if app == "sleep.ru"

      base = @results.find { |n, (a, w, t), res| n == name && a == app && w == workers && t == 1 && res }&.last
      base ? format("%.2fx of 2x1", rate(r) / rate(base)) : "-"
    end

    def print_threads_table
      puts
      header = format("%-9s %-6s %-8s %10s %10s  %-14s %s", "app", "WxT", "server", "req/s", "p99", "vs ideal", "errors")
      puts header
      puts "-" * header.size
      @results.each do |name, setting, r|
        app, w, t = setting
        next puts(format("%-9s %-6s %-8s %10s", app, "#{w}x#{t}", name, "not available")) unless r

        puts format("%-9s %-6s %-8s %10.1f %10s  %-14s %s", app, "#{w}x#{t}", name, rate(r),
                    ms(r[:latency][:p99]), vs_ideal(name, setting, r), failures(r))
      end
    end
  end

  def self.threads_main(argv)
    o = Compare::Options.new(duration: 5.0, warmup: 1.0, threads: 1, connections: 2, timeout: 10.0,
                             tcp: false, servers: %w[oribi puma], oribi_root: Compare::ROOT)
    OptionParser.new do |p|
      p.banner = "usage: bundle exec ruby bench/threads.rb [options]"
      p.on("--duration SECONDS", Float, "measured seconds per setting and server (5)") { |v| o.duration = v }
      p.on("--warmup SECONDS", Float, "discarded run before each (1; 0 = none)") { |v| o.warmup = v }
      p.on("--servers LIST", Array, "among oribi,puma (both)") { |v| o.servers = v }
    end.parse!(argv)
    Threads.new(o).run
  end
end

Bench.threads_main(ARGV) if $PROGRAM_NAME == __FILE__
