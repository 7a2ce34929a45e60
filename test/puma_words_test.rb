# frozen_string_literal: true

require "test_helper"

# The Puma words that change what is served, run by a server from a Puma
# config: each was ignored with a line, and the app then served something
# else than under Puma (a 500 where the handler gave its page, PROPFIND
# passed where Puma answers 501, http URLs behind TLS, no thread hook, a
# server that never stopped when idle).
class PumaWordsTest < Minitest::Test
  APP = <<~RUBY
    run lambda { |env|
      raise "boom in the app" if env["PATH_INFO"] == "/boom"

      [200, { "content-type" => "text/plain" }, [env["rack.url_scheme"]]]
    }
  RUBY

  def test_the_serving_words_of_a_puma_config_take_effect
    dir = Dir.mktmpdir("oribi-puma-words")
    File.write(File.join(dir, "config.ru"), APP)
    File.write(File.join(dir, "puma.rb"), <<~RUBY)
      workers 1
      threads 2, 2
      rack_url_scheme "https"
      lowlevel_error_handler { |error| [503, { "content-type" => "text/plain" }, ["handled: \#{error.message}"]] }
      before_thread_start { File.write(File.join(#{dir.dump}, "thread-\#{Thread.current.object_id}"), Process.pid.to_s) }
      idle_timeout 3
    RUBY
    srv = ServerProcess.new(File.join(dir, "config.ru"), "-C", File.join(dir, "puma.rb"), workers: nil, unix: false,
                                                                                           env: { "WEB_CONCURRENCY" => nil })
    s = srv.tcp
    assert_equal "https", HTTPClient.request(s, "/").body
    res = HTTPClient.request(s, "/boom")
    assert_equal [503, "handled: boom in the app"], [res.status, res.body]
    assert_equal 501, HTTPClient.request(s, "/", method: "PROPFIND").status # Puma's methods only, as Puma
    assert_equal 200, HTTPClient.request(s, "/", method: "PATCH").status
    s.close
    threads = wait_until { (files = Dir[File.join(dir, "thread-*")]).size == 2 && files }
    assert threads, "before_thread_start did not run in both app threads:\n#{srv.log}"
    assert_equal srv.worker_pids.map(&:to_s), threads.map { |f| File.read(f) }.uniq
    status = srv.wait_exit(20)
    assert status&.success?, "idle_timeout 3 did not stop the server: #{status.inspect}\n#{srv.log}"
    assert_match(/idle_timeout \(3(\.0)? s\): no request since .*: draining/, srv.log)
  ensure
    srv&.stop
    FileUtils.rm_rf(dir) if dir
  end
end
