# frozen_string_literal: true

require "rack3_helper"

# env["rack.response_finished"]: callables run after the response, last
# added first, with (env, status, headers, error); one that raises is
# logged and does not stop the others.
class ResponseFinishedTest < Minitest::Test
  include SharedServer
  server "rack3.ru", env: Rack3Files.server_env

  def test_callables_run_after_the_response_in_reverse_order
    s = server.tcp
    res = HTTPClient.request(s, "/finished")
    assert_equal "done", res.body
    log = server.log_until(%r{finished a /finished})
    assert_match(%r{finished a /finished 200 nil}, log)
    boom = log.index("rack.response_finished callable raised: RuntimeError: callback boom")
    refute_nil boom, log
    assert_operator boom, :<, log.index("finished a /finished"), "the last added runs first"
    assert_equal 200, HTTPClient.request(s, "/pid").status, "the worker goes on"
  ensure
    s&.close
  end

  def test_the_apps_exception_is_passed
    res = HTTPClient.request(server.tcp, "/finished-raise")
    assert_equal 500, res.status
    assert_match(%r{finished r /finished-raise 500 RuntimeError}, server.log_until(%r{finished r }))
  end

  def test_a_client_that_went_away_is_passed_as_an_error
    s = server.tcp
    s.write("GET /finished-gone HTTP/1.1\r\nHost: t\r\n\r\n")
    s.readpartial(1024)
    s.close
    assert_match(%r{finished g /finished-gone 200 Oribi::ClientGone}, server.log_until(%r{finished g }, timeout: 10))
  end

  def test_plain_responses_pass_no_error
    %w[/pid?log=1 /stream?log=1 /file?name=small.bin&log=1].each do |path|
      HTTPClient.request(server.tcp, path)
      name = path[/\A[^?]+/]
      assert_match(/finished log #{Regexp.escape(name)} 200 nil/, server.log_until(/finished log #{Regexp.escape(name)} /))
    end
  end
end
