# frozen_string_literal: true

require "test_helper"
require "json"

# refork_after (docs/REFORK.md): a warm worker becomes the mold, every
# worker is forked again from it, and serving goes on without a failure.
class ReforkTest < Minitest::Test
  def stats(control)
    sock = UNIXSocket.new(control)
    JSON.parse(HTTPClient.request(sock, "/stats").body)
  ensure
    sock&.close
  end

  def ppid(pid) = File.read("/proc/#{pid}/stat").sub(/\A.*\) /, "").split[1].to_i

  def test_workers_are_reforked_from_the_mold_under_load
    skip "no child subreaper in this build: refork is refused (the test below)" unless Oribi.child_subreaper?
    dir = Dir.mktmpdir("oribi-refork")
    control = File.join(dir, "control.sock")
    srv = ServerProcess.new("env.ru", "--refork-after", "200,400", "--rolling-interval", "0",
                            "--control", "unix://#{control}", workers: 2, tcp: false)
    req = "GET / HTTP/1.1\r\nHost: t\r\n\r\n"
    load = Thread.new do
      Oribi::Loadgen.run(unix_path: srv.sock, request: req, threads: 1, connections: 20, duration: 10,
                         keepalive: true, timeout: 10)
    end
    gen2 = wait_until(timeout: 15) do
      s = stats(control)
      workers = s["workers"].reject { |w| w["mold"] || w["retiring"] }
      s if workers.size == 2 && workers.all? { |w| w["generation"] == 2 && w["booted"] }
    end
    assert gen2, "not reforked twice: #{JSON.pretty_generate(stats(control))}\n#{log_end(srv.log, 3000)}"
    gen2["workers"].reject { |w| w["retiring"] }.each do |w|
      assert_equal srv.pid, ppid(w["pid"]), "worker #{w['pid']} is not the master's child"
    end
    # the older mold exits once the new one took over
    assert wait_until { stats(control)["workers"].count { |w| w["mold"] } == 1 }, "not one mold"
    mold = stats(control)["workers"].find { |w| w["mold"] }
    assert_equal srv.pid, ppid(mold["pid"])
    assert_match(/mold of generation 1/, srv.log)
    assert_match(/mold of generation 2/, srv.log)
    result = load.value
    assert_operator result[:requests], :>, 400
    assert_equal 0, result[:errors].values.sum, result[:errors].inspect
    assert_equal [200], result[:status].keys
    assert_equal 200, HTTPClient.request(srv.unix, "/").status
    status = srv.stop
    assert status.success?, "exit #{status.inspect}: #{log_end(srv.log)}"
  ensure
    load&.kill
    srv&.stop
    FileUtils.rm_rf(dir) if dir
  end

  # Without a child subreaper (macOS, the portable build) the mold's workers
  # would not be the master's to reap: refork_after is refused at start.
  def test_refork_after_needs_a_child_subreaper
    skip "this build has a child subreaper" if Oribi.child_subreaper?
    out, _, status = run_command(RbConfig.ruby, File.join(ROOT, "exe/oribi"), "--refork-after", "10",
                                 File.join(APPS, "env.ru"), merge: true, timeout: 30)
    refute status.success?
    assert_match(/refork_after needs a child subreaper/, out)
  end

  def test_refork_after_is_checked
    out = IO.popen([RbConfig.ruby, File.join(ROOT, "exe/oribi"), "--refork-after", "10,x", File.join(APPS, "env.ru")],
                   err: %i[child out], &:read)
    refute $?.success?
    assert_match(/refork-after/, out)
  end
end
