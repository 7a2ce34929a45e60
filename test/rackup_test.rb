# frozen_string_literal: true

require "test_helper"
require "framework_process"

# `rackup -s oribi` as a user runs it: rackup's own options (-p, -o, -E) and
# Oribi's through -O. In development rackup puts Rack::Lint in front of the
# app, so the env Oribi builds is checked on every request.
class RackupTest < Minitest::Test
  APP_DIR = File.join(APPS, "rackup")

  def rackup(*args, env: {})
    FrameworkProcess.new(env: env, chdir: APP_DIR) do |port|
      [RbConfig.ruby, Gem.bin_path("rackup", "rackup"), "-s", "oribi", "-p", port.to_s, *args, "config.ru"]
    end
  end

  # TERM drains and ends rackup with status 0.
  def assert_stops(srv)
    log = srv.log
    st = srv.stop
    assert st.success?, "TERM gave #{st.inspect}:\n#{log}"
  end

  def test_serves_with_workers_and_keepalive_from_the_command_line
    srv = rackup("-o", "127.0.0.1", "-O", "Workers=2", "-O", "Keepalive=false")
    res = HTTPClient.request(srv.tcp, "/hi")
    assert_equal 200, res.status, res.body
    assert_match(/\Adevelopment multiprocess=true pid=\d+ GET \/hi/, res.body)
    assert_equal "close", res["connection"] # Keepalive=false reached the engine
    res = HTTPClient.request(srv.tcp, "/echo", method: "POST", body: "payload")
    assert_match(/POST \/echo payload\z/, res.body)
    log = srv.log_until(/127\.0\.0\.1 - - .*POST \/echo/) # rackup's CommonLogger
    assert_match(/2 workers, env development/, log)
    assert_match(/listening on tcp:\/\/127\.0\.0\.1:#{srv.port}$/, log)
    assert_stops(srv)
  ensure
    srv&.stop
  end

  def test_single_process_and_environment
    srv = rackup("-o", "127.0.0.1", "-E", "production", "-O", "Workers=1")
    res = HTTPClient.request(srv.tcp, "/")
    assert_match(/\Aproduction multiprocess=false /, res.body)
    assert_nil res["connection"]
    assert_stops(srv)
  ensure
    srv&.stop
  end

  def test_bind_option_adds_a_unix_socket
    dir = Dir.mktmpdir("oribi-test")
    sock = File.join(dir, "r.sock")
    srv = FrameworkProcess.new(chdir: APP_DIR) do |port|
      [RbConfig.ruby, Gem.bin_path("rackup", "rackup"), "-s", "oribi", "-O", "Workers=1",
       "-O", "Bind=tcp://127.0.0.1:#{port},unix://#{sock}", "config.ru"]
    end
    # the TCP port answers (the kernel queues) before the unix socket is bound
    assert wait_until(timeout: 10) { File.socket?(sock) }, "no unix socket"
    assert_equal 200, HTTPClient.request(UNIXSocket.new(sock), "/").status
    assert_stops(srv)
    refute File.exist?(sock), "the socket file is removed on exit"
  ensure
    srv&.stop
    FileUtils.rm_rf(dir) if dir
  end

  def test_help_lists_oribi_options
    out, = FrameworkProcess.capture(RbConfig.ruby, Gem.bin_path("rackup", "rackup"), "-s", "oribi", "-h")
    assert_match(/Server-specific options for Rackup::Handler::Oribi/, out)
    %w[Workers=N Bind= Keepalive= KeepaliveTimeout= MaxBody=].each { |o| assert_includes out, "-O #{o}" }
  end

  def test_bad_option_value_stops_rackup
    out, st = FrameworkProcess.capture(RbConfig.ruby, Gem.bin_path("rackup", "rackup"), "-s", "oribi",
                                       "-p", "0", "-O", "Workers=many", "config.ru", chdir: APP_DIR, timeout: 10)
    refute st.success?
    assert_match(/invalid value for workers: "many"/, out)
  end
end
