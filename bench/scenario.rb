# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../oribi-bench/lib", __dir__))
require "oribi/loadgen"
require "oribi/bench/targets"
require_relative "suite/nginx"
require_relative "suite/process_group"
require_relative "suite/servers"
require "fileutils"
require "socket"
require "tmpdir"

module Bench
  # One server of the suite (2 workers × 1 thread, RACK_ENV=production) on a
  # unix socket, optionally behind nginx with an upstream keep-alive pool
  # (how it is deployed), for the scenario scripts (fairness.rb, drain.rb):
  # started, told apart as a target, stopped.
  class Scenario
    ROOT = File.expand_path("..", __dir__)
    WORKERS = 2

    attr_reader :name, :via, :group, :target, :log

    # via: "direct" or "nginx"; keepalive: nginx's upstream keepalive pool
    def initialize(name, app, via: "direct", keepalive: 32)
      @name = name
      @via = via
      @dir = Dir.mktmpdir("oribi-scenario-", "/tmp")
      @sock = File.join(@dir, "#{name}.sock")
      @log = File.join(@dir, "#{name}.log")
      server = Suite.server(name)
      argv = server.argv.call(@dir, WORKERS, @sock, nil, File.join(ROOT, "bench", "apps", app), app)
      env = { "RACK_ENV" => "production", "BUNDLE_GEMFILE" => File.join(ROOT, "Gemfile") }
      @group = Suite::ProcessGroup.new(argv, env: env, log: @log, chdir: ROOT)
      @target = { unix_path: @sock }
      wait!(@group, @target)
      start_nginx(keepalive) if via == "nginx"
    end

    def label = "#{name} #{via}"
    def tcp? = @target.key?(:port)
    def connect = tcp? ? TCPSocket.new("127.0.0.1", @target[:port]) : UNIXSocket.new(@sock)
    def request(path = "/", close: false) = Oribi::Bench::Targets.get(path, keepalive: !close)

    # The server's own pid (the master), for signals.
    def pid = @group.pid

    def stop
      @nginx&.stop
      @group.stop
    ensure
      FileUtils.rm_rf(@dir)
    end

    private

    def start_nginx(keepalive)
      port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
      argv = Suite::Nginx.proxy_argv(@dir, 1, port, "unix:#{@sock}", keepalive: keepalive)
      @nginx = Suite::ProcessGroup.new(argv, env: {}, log: File.join(@dir, "nginx.log"), chdir: @dir)
      @target = { host: "127.0.0.1", port: port }
      wait!(@nginx, @target)
    end

    def wait!(group, target)
      failed = group.wait_ready(target, request(close: true))
      raise "#{label}: #{failed}\n#{group.tail.join}" if failed
    end
  end
end
