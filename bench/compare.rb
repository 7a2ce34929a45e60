# frozen_string_literal: true

# Compares Rack servers serving bench/apps/hello.ru, one at a time, each with 2
# single-threaded workers on a unix socket under /tmp (or 127.0.0.1 with
# --tcp), loaded by Oribi::Loadgen in two modes: keep-alive and a new
# connection per request (connect time counted in the latency).
#
#   bundle exec rake compile
#   bundle exec ruby bench/compare.rb [--duration 10] [--tcp] [--servers oribi,puma]
#
# `--servers oribi,nginx` measures Oribi's own cost against nginx's
# `return 200` (2 workers, the same body): the table's last lines give the
# server CPU per request of each, and their ratio, for each mode.
#
# Every server gets the same treatment: boot, wait until it answers, a short
# warm-up run that is discarded, then the measured runs; then it is stopped
# (its whole process group) and its socket removed. The box is shared by the
# servers and the load generator, so keep the load modest and compare ratios,
# not absolute numbers.
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../oribi-bench/lib", __dir__))
require "oribi/loadgen"
require "oribi/bench/targets"
require_relative "pin"
require_relative "suite/nginx"
require_relative "suite/process_group"
require "fileutils"
require "json"
require "optparse"
require "socket"
require "tmpdir"

module Bench
  class Compare
    ROOT = File.expand_path("..", __dir__)
    APP = File.join(ROOT, "bench", "apps", "hello.ru")
    BOOT_TIMEOUT = 30 # seconds for a server to answer its first requests
    MODES = { "keep-alive" => true, "close" => false }.freeze
    Options = Struct.new(:duration, :warmup, :threads, :connections, :timeout, :tcp,
                         :servers, :oribi_root, :json, :pin, keyword_init: true)

    def initialize(opts)
      @o = opts
      @tmp = Dir.mktmpdir("oribi-bench-", "/tmp")
      @results = [] # [server, mode, result Hash or nil]
    end

    def run
      puts "loadgen: #{@o.threads} threads, #{@o.connections} connections, " \
           "#{@o.duration}s per mode (+#{@o.warmup}s warm-up), " \
           "#{@o.tcp ? 'TCP 127.0.0.1' : 'unix socket'}" \
           "#{@o.pin ? ", servers on CPU #{@o.pin[0]}, loadgen on CPU #{@o.pin[1]}" : ''}"
      interrupted = false
      begin
        @o.servers.each { |name| bench_server(name) }
      rescue Interrupt # servers are already stopped: show what was measured
        interrupted = true
        puts "\ninterrupted"
      end
      print_table
      write_json(@o.json) if @o.json
      exit 130 if interrupted
    ensure
      FileUtils.rm_rf(@tmp)
    end

    private

    def write_json(path)
      rows = @results.map { |server, mode, result| { server: server, mode: mode, result: result } }
      File.write(path, JSON.pretty_generate(rows))
    end

    # Where a server listens, in each server's own spelling.
    def address(name)
      if @o.tcp
        port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
        { uri: "tcp://127.0.0.1:#{port}", listen: "127.0.0.1:#{port}",
          target: { host: "127.0.0.1", port: port } }
      else
        path = File.join(@tmp, "#{name}.sock")
        { uri: "unix://#{path}", listen: path, path: path, target: { unix_path: path } }
      end
    end

    # The command line for a server, or nil when it cannot be run here.
    # RACK_ENV=production everywhere: in development Unicorn wraps the app
    # in Lint, ShowExceptions and a logger, which would measure those.
    def command(name, addr)
      case name
      when "unicorn"
        cfg = File.join(@tmp, "unicorn.conf.rb")
        File.write(cfg, "worker_processes 2\n")
        %W[bundle exec unicorn -E production -l #{addr[:listen]} -c #{cfg} #{APP}]
      when "puma"
        %W[bundle exec puma -e production -w 2 -t 1:1 -b #{addr[:uri]} #{APP}]
      when "oribi"
        exe = File.join(@o.oribi_root, "exe", "oribi")
        return nil unless File.exist?(exe)

        %W[bundle exec ruby #{exe} -w 2 -b #{addr[:uri]} #{APP}]
      when "nginx"
        return nil unless Suite::Nginx.available?

        Suite::Nginx.return200_argv(@tmp, 2, addr[:path], addr.dig(:target, :port))
      else
        abort "unknown server #{name} (known: oribi, puma, unicorn, nginx)"
      end
    end

    def bench_server(name)
      addr = address(name)
      argv = command(name, addr)
      return unavailable(name, name == "nginx" ? "not installed" : "exe/oribi not found in #{@o.oribi_root}") unless argv

      log = File.join(@tmp, "#{name}.log")
      chdir = name == "oribi" ? @o.oribi_root : ROOT
      env = { "RACK_ENV" => "production" }
      env["BUNDLE_GEMFILE"] = File.join(chdir, "Gemfile")
      group = Suite::ProcessGroup.new(Pin.argv(@o.pin&.first, argv), env: env, log: log, chdir: chdir)
      begin
        failed = group.wait_ready(addr[:target], request(false), timeout: BOOT_TIMEOUT)
        return unavailable(name, failed, log) if failed

        MODES.each do |mode, keepalive|
          load_run(addr, keepalive, @o.warmup) if @o.warmup.positive?
          cpu = group_cpu(group)
          result = load_run(addr, keepalive, @o.duration)
          result[:server_cpu] = group_cpu(group) - cpu
          @results << [name, mode, result]
          puts format("  %-8s %-10s %10.1f req/s", name, mode, rate(result))
        end
      ensure
        group.stop
        FileUtils.rm_f(addr[:path]) if addr[:path]
      end
    end

    def unavailable(name, why, log = nil)
      puts "#{name}: not available (#{why})"
      if log && File.exist?(log)
        tail = File.readlines(log).last(5)
        tail.each { |l| puts "    | #{l}" }
      end
      MODES.each_key { |mode| @results << [name, mode, nil] }
      nil
    end

    def request(keepalive)
      Oribi::Bench::Targets.get("/", keepalive: keepalive)
    end

    def load_run(addr, keepalive, duration)
      Oribi::Loadgen.run(addr[:target].merge(request: request(keepalive), threads: @o.threads,
                                             connections: @o.connections, duration: duration,
                                             keepalive: keepalive, timeout: @o.timeout))
    end

    # CPU seconds used so far by the server's whole process tree (master
    # and workers): how much of the shared box each request cost the server.
    def group_cpu(group) = group.stats.sum { |_, (cpu, _)| cpu }

    def cpu_us(result)
      return "-" unless result[:server_cpu] && result[:requests].positive?

      format("%.1f", result[:server_cpu] * 1e6 / result[:requests])
    end

    def rate(result)
      result[:requests] / result[:elapsed]
    end

    def ms(us)
      us ? format("%.2fms", us / 1000.0) : "-"
    end

    # Transport errors, plus responses that are not 2xx/3xx: both are
    # requests the server failed.
    def failures(result)
      parts = result[:errors].select { |_, n| n.positive? }.map { |k, n| "#{k}:#{n}" }
      bad = result[:status].sum { |code, n| code >= 200 && code < 400 ? 0 : n }
      parts << "non-2xx/3xx:#{bad}" if bad.positive?
      total = result[:errors].values.sum + bad
      total.zero? ? "0" : "#{total} (#{parts.join(' ')})"
    end

    def print_table
      puts
      header = format("%-10s %-8s %12s %10s %10s  %-8s %12s  %s", "mode", "server", "req/s", "p50",
                      "p99", "vs oribi", "cpu us/req", "errors")
      puts header
      puts "-" * header.size
      MODES.each_key do |mode|
        rows = @results.select { |_, m, _| m == mode }
        oribi = rows.find { |s, _, r| s == "oribi" && r }&.last
        rows.each do |server, _, r|
          if r.nil?
            puts format("%-10s %-8s %12s", mode, server, "not available")
            next
          end
          ratio = oribi && rate(oribi).positive? ? format("%.2fx", rate(r) / rate(oribi)) : "-"
          puts format("%-10s %-8s %12.1f %10s %10s  %-8s %12s  %s", mode, server, rate(r),
                      ms(r[:latency][:p50]), ms(r[:latency][:p99]), ratio, cpu_us(r), failures(r))
        end
      end
      print_cpu_ratios
    end

    # Server CPU per request, Oribi's over each other server's (under 1.00:
    # Oribi spent less), per mode.
    def print_cpu_ratios
      MODES.each_key do |mode|
        rows = @results.select { |_, m, r| m == mode && r && r[:server_cpu] && r[:requests].positive? }
        oribi = rows.find { |s, _, _| s == "oribi" }&.last
        next unless oribi

        rows.each do |server, _, r|
          next if server == "oribi"

          puts format("cpu per request, %-10s oribi / %-8s %.2f", mode, server, per_request(oribi) / per_request(r))
        end
      end
    end

    def per_request(result) = result[:server_cpu] / result[:requests]
  end

  def self.compare_main(argv)
    original = argv.dup
    o = Compare::Options.new(duration: 10.0, warmup: 1.0, threads: 2, connections: 50,
                             timeout: 10.0, tcp: false, servers: %w[oribi puma unicorn],
                             oribi_root: Compare::ROOT, json: nil)
    OptionParser.new do |p|
      p.banner = "usage: bundle exec ruby bench/compare.rb [options]"
      p.on("--duration SECONDS", Float, "measured seconds per server and mode (10)") { |v| o.duration = v }
      p.on("--warmup SECONDS", Float, "discarded run before each mode (1; 0 = none)") { |v| o.warmup = v }
      p.on("--threads N", Integer, "load generator threads (2)") { |v| o.threads = v }
      p.on("--connections N", Integer, "load generator connections (50)") { |v| o.connections = v }
      p.on("--timeout SECONDS", Float, "per-request timeout (10)") { |v| o.timeout = v }
      p.on("--tcp", "listen on 127.0.0.1 instead of a unix socket") { o.tcp = true }
      p.on("--servers LIST", Array, "among oribi,puma,unicorn,nginx (oribi,puma,unicorn)") { |v| o.servers = v }
      p.on("--oribi-root DIR", "checkout whose exe/oribi to run (this one)") do |v|
        o.oribi_root = File.expand_path(v)
      end
      p.on("--json FILE", "also write the raw results") { |v| o.json = v }
      p.on("--pin", "servers on half the CPUs, the load generator on the rest (bench/pin.rb)") { o.pin = true }
    end.parse!(argv)
    o.pin = Pin.reexec!(__FILE__, original) || abort("--pin needs at least 2 CPUs and taskset") if o.pin
    Compare.new(o).run
  end
end

Bench.compare_main(ARGV) if $PROGRAM_NAME == __FILE__
