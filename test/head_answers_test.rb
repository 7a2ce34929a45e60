# frozen_string_literal: true

require "test_helper"

# Every answer the server makes itself follows the HEAD rule (RFC 9110
# 9.3.2): to a HEAD request, a head and no body. A body there is read by
# the client as the start of the next response: after a 417 the
# connection goes on, and `Expectation Failed\n` came before the next
# answer's status line. The answers that close the connection carry no body
# either, as the server knows the method when it answers.
class HeadAnswersTest < Minitest::Test
  def setup
    @srv = ServerProcess.new("responses.ru", "--max-body", "100", "--header-timeout", "1", workers: 1)
  end

  def teardown
    @srv&.stop
  end

  def assert_head_only(status, request)
    s = @srv.tcp
    s.write(request)
    raw = HTTPClient.read_to_close(s)
    assert_match(/\AHTTP\/1.1 #{status} /, raw, request[0, 60].inspect)
    head, body = raw.split("\r\n\r\n", 2)
    assert_match(/^connection: close$/i, head)
    assert_equal "", body, "#{status} to a HEAD request carried a body"
  ensure
    s&.close
  end

  def test_a_417_to_head_has_no_body_and_the_next_answer_follows
    s = @srv.tcp
    s.write("HEAD /x HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\nGET /status?code=200 HTTP/1.1\r\nHost: a\r\n\r\n")
    res = HTTPClient.read_response(s, head: true)
    assert_equal 417, res.status
    assert_equal 200, HTTPClient.read_response(s).status, "the next answer was read whole, from its status line"
    # and GET still gets the 417's text
    s.write("GET /x HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n")
    assert_equal "Expectation Failed\n", HTTPClient.read_response(s).body
  ensure
    s&.close
  end

  def test_the_answers_that_close_have_no_body_for_head
    assert_head_only 400, "HEAD / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n"
    assert_head_only 413, "HEAD / HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n"
    assert_head_only 414, "HEAD /#{'a' * 9000} HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_head_only 431, "HEAD / HTTP/1.1\r\nHost: a\r\nX-Big: #{'b' * 70_000}\r\n\r\n"
    assert_head_only 501, "HEAD / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n"
    assert_head_only 505, "HEAD / HTTP/3.0\r\nHost: a\r\n\r\n"
    assert_head_only 408, "HEAD / HTTP/1.1\r\nHost: a\r\n" # and nothing more: header_timeout
    assert_head_only 500, "HEAD /bad-status HTTP/1.1\r\nHost: a\r\n\r\n" # a response the server refuses
    # and a GET still reads why
    s = @srv.tcp
    s.write("GET / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n")
    assert_match(/\r\n\r\nBad Request\n\z/, HTTPClient.read_to_close(s))
  ensure
    s&.close
  end

  # An app that raised: the server's 500, on a connection that goes on
  def test_a_500_to_head_has_no_body
    s = @srv.tcp
    s.write("HEAD /raise HTTP/1.1\r\nHost: a\r\n\r\nGET /status?code=200 HTTP/1.1\r\nHost: a\r\n\r\n")
    assert_equal 500, HTTPClient.read_response(s, head: true).status
    assert_equal "body!", HTTPClient.read_response(s).body
  ensure
    s&.close
  end

  # 100 Continue is a head alone anyway; the final answer to a HEAD with a
  # body that the app reads follows the rule as every app answer does.
  def test_a_100_continue_to_head_then_its_answer
    s = @srv.tcp
    s.write("HEAD /status?code=200 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    assert_equal "HTTP/1.1 100 Continue\r\n", HTTPClient.read_line(s, deadline)
    assert_equal "\r\n", HTTPClient.read_line(s, deadline)
    s.write("abc")
    assert_equal 200, HTTPClient.read_response(s, head: true).status
    s.write("GET /status?code=200 HTTP/1.1\r\nHost: a\r\n\r\n")
    assert_equal "body!", HTTPClient.read_response(s).body
  ensure
    s&.close
  end
end
