# frozen_string_literal: true

require "rack3_helper"
require "framework_process"
require_relative "nginx_proxy"
require_relative "haproxy_proxy"
require_relative "varnish_proxy"
require_relative "apache_proxy"
require_relative "squid_proxy"
require_relative "h2o_proxy"
require_relative "caddy_proxy"

# Oribi with early_hints on behind each proxy it may be deployed behind:
# what a client gets for GET /hints (two 103s, then 200 "final") and HEAD
# /hints through it. The table below is what each does on Debian 12's
# packages (and the thruster gem's binary); docs/DEPLOYMENT.md ("Early
# hints behind a proxy") gives it to users, so a proxy or Oribi that
# starts behaving otherwise fails here rather than in a deployment.
#
# A case skips when its proxy is not installed, unless
# ORIBI_PROXIES_REQUIRED=1 (CI), where a missing proxy fails.
class EarlyHintsProxiesTest < Minitest::Test
  include SharedServer
  server "rack3.ru", "--early-hints", env: Rack3Files.server_env

  # Every read is bounded: a proxy that waits for more (nginx 1.22, below)
  # shows as :timeout after this many seconds.
  PATIENCE = 5

  # Per proxy, for GET and HEAD (each on a connection of its own): how
  # many 103s the client got, and the answer after them: "STATUS BODY"
  # ("200 final": the app's response; a HEAD's has no body), or :timeout
  # when nothing final came within PATIENCE.
  EXPECTED = {
    # nginx 1.22 (Debian 12) takes the first 103 for the final response:
    # the GET's 103 is held back until Oribi's keepalive_timeout (20 s)
    # closes the upstream connection, then comes with the rest as its
    # body; the HEAD gets the 103 as its answer, and nothing after it.
    # From 1.29 (1.30 in Debian sid, the Ruby 3.4 run's) it drops the 103s
    # and forwards the final response, as h2o does (its early_hints
    # directive, off by default, would forward them).
    nginx: if ((NginxProxy.version || [0]) <=> [1, 29]).negative?
             { get: [0, :timeout], head: [1, :timeout] }
           else
             { get: [0, "200 final"], head: [0, "200"] }
           end,
    haproxy: { get: [2, "200 final"], head: [2, "200"] },
    # Varnish 7.1 takes the 103 for the backend's response (varnishlog:
    # BerespStatus 103, then "Body cannot be fetched") and answers its
    # own 503 "Backend fetch failed", to HEAD too.
    varnish: { get: [0, "503"], head: [0, "503"] },
    apache: { get: [2, "200 final"], head: [2, "200"] },
    squid: { get: [2, "200 final"], head: [2, "200"] },
    # h2o 2.2 drops the 103s and forwards the final response.
    h2o: { get: [0, "200 final"], head: [0, "200"] },
    caddy: { get: [2, "200 final"], head: [2, "200"] },
    thruster: { get: [2, "200 final"], head: [2, "200"] }
  }.freeze

  # The proxies in front of the shared server: the block gets it and
  # returns the proxy. Those whose workers drop root (Varnish, Apache,
  # Squid, h2o) take its TCP port: they cannot enter the root-owned
  # tmpdir its unix socket is in.
  PROXIES = {
    nginx: [NginxProxy, ->(server) { NginxProxy.new(server.sock) }],
    haproxy: [HaproxyProxy, ->(server) { HaproxyProxy.new(server.sock) }],
    varnish: [VarnishProxy, ->(server) { VarnishProxy.new(server.port) }],
    apache: [ApacheProxy, ->(server) { ApacheProxy.new(server.port) }],
    squid: [SquidProxy, ->(server) { SquidProxy.new(server.port) }],
    h2o: [H2oProxy, ->(server) { H2oProxy.new(server.port) }],
    caddy: [CaddyProxy, ->(server) { CaddyProxy.new(server.sock) }]
  }.freeze

  def require_proxy(name, available)
    return if available

    reason = "#{name} is not installed: Oribi's early hints behind it were not tested"
    flunk "#{reason}, and ORIBI_PROXIES_REQUIRED=1 (CI)" if ENV["ORIBI_PROXIES_REQUIRED"] == "1"
    skip reason
  end

  # [103s, answer] for one request on a connection of its own, read until
  # deadline. A 1xx is taken as interim, as a client does.
  def outcome(sock, head, deadline)
    hints = 0
    loop do
      left = deadline - now
      raise Timeout::Error if left <= 0

      res = HTTPClient.read_response(sock, timeout: left, head: head)
      return [hints, :closed] unless res
      next hints += 1 if res.status == 103

      # The app's body, to tell it from a proxy's own 200; a proxy's error
      # page says nothing the status does not.
      return [hints, res.status == 200 && !head ? "200 #{res.body}" : res.status.to_s]
    end
  rescue Timeout::Error
    [hints, :timeout]
  end

  # GET and HEAD sent at once on two connections to port, each read in a
  # thread of its own within one PATIENCE: a proxy that hangs both costs
  # it once, and what came on one is read while the other waits.
  def through(port)
    socks = %w[GET HEAD].map do |method|
      TCPSocket.new("127.0.0.1", port).tap { |s| s.write("#{method} /hints HTTP/1.1\r\nHost: t\r\n\r\n") }
    end
    deadline = now + PATIENCE
    readers = socks.zip([false, true]).map { |sock, head| Thread.new { outcome(sock, head, deadline) } }
    { get: readers[0].value, head: readers[1].value }
  ensure
    socks&.each(&:close)
  end

  PROXIES.each do |name, (klass, start)|
    define_method("test_early_hints_behind_#{name}") do
      require_proxy(name, klass.available?)
      proxy = start.call(server)
      assert_equal EXPECTED.fetch(name), through(proxy.port), "#{name} in front; its log:\n#{log_end(proxy.log)}"
    ensure
      proxy&.stop
    end
  end

  # Thruster (Rails 8's proxy, the thruster gem) starts the server itself,
  # with its TARGET_PORT, and answers 502 until the server is up.
  def test_early_hints_behind_thruster
    spec = begin
      Gem::Specification.find_by_name("thruster")
    rescue Gem::MissingSpecError
      nil
    end
    require_proxy(:thruster, spec)
    storage = Dir.mktmpdir("oribi-thruster")
    target = free_port
    env = Rack3Files.server_env.merge("TARGET_PORT" => target.to_s, "STORAGE_PATH" => storage,
                                      "LOG_REQUESTS" => "false")
    srv = FrameworkProcess.new(env: env) do |port|
      env["HTTP_PORT"] = port.to_s # read when the process is spawned, after this block
      [RbConfig.ruby, spec.bin_file("thrust"), RbConfig.ruby, File.join(ROOT, "exe/oribi"), "--early-hints",
       "-b", "tcp://127.0.0.1:#{target}", File.join(APPS, "rack3.ru")]
    end
    up = wait_until(timeout: 30, interval: 0.05) do
      s = srv.tcp
      HTTPClient.request(s, "/pid", headers: { "Connection" => "close" })&.status == 200
    rescue SystemCallError, EOFError
      false
    ensure
      s&.close
    end
    assert up, "no 200 through Thruster:\n#{log_end(srv.log)}"
    assert_equal EXPECTED.fetch(:thruster), through(srv.port), "Thruster in front; its log:\n#{log_end(srv.log)}"
  ensure
    srv&.stop
    FileUtils.rm_rf(storage) if storage
  end
end
