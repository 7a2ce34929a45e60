# frozen_string_literal: true

require "test_helper"

# A client that sends its next requests before the answers (pipelining):
# the answers of a deep pipeline leave together (oribi_conn_write_last), and
# none waits for a request still on its way or for another's long app call.
class PipeliningTest < Minitest::Test
  include SharedServer
  server "pipeline.ru"

  def get(path) = "GET #{path} HTTP/1.1\r\nHost: t\r\n\r\n"

  def mono = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def test_a_deep_pipeline_is_answered_in_order
    server.each_transport do |name, open|
      s = open.call
      paths = (1..64).map { |i| "/p#{i}" }
      s.write(paths.map { |p| get(p) }.join)
      paths.each { |p| assert_equal p, HTTPClient.read_response(s).body, name }
      # and the connection goes on, one request at a time
      assert_equal "/after", HTTPClient.request(s, "/after").body
      s.close
    end
  end

  # A connection keeps the header fields of its request in itself up to a
  # number, past it in memory of their own for that request: pipelined
  # heads of 3, 16, 17 and 90 fields, in turns, each reach the app whole
  # and none another's.
  def test_each_head_s_fields_reach_the_app_whole_however_many
    server.each_transport do |name, open|
      s = open.call
      counts = [3, 90, 16, 17, 2, 40, 1, 16]
      heads = counts.each_with_index.map do |n, r|
        "GET /fields HTTP/1.1\r\nHost: t\r\n#{(1..n).map { |i| "X-F-#{i}: r#{r}-v#{i}\r\n" }.join}\r\n"
      end
      s.write(heads.join)
      counts.each_with_index do |n, r|
        assert_equal (1..n).map { |i| "HTTP_X_F_#{i}=r#{r}-v#{i}\n" }.join, HTTPClient.read_response(s).body, "#{name}: request #{r}"
      end
      s.close
    end
  end

  # More than one write's worth held back (ORIBI_CORK_MAX): the answers go
  # out whole and in order, to a client that reads them only later.
  def test_large_answers_in_a_pipeline_reach_a_late_reader_whole
    s = server.unix
    s.write((1..24).map { |i| get("/big?kb=#{8 * i}") }.join + get("/last"))
    assert s.wait_readable(10), "no answer came"
    (1..24).each do |i|
      res = HTTPClient.read_response(s)
      assert_equal 200, res.status
      assert_equal "b" * (8192 * i), res.body, "answer #{i}"
    end
    assert_equal "/last", HTTPClient.read_response(s).body
  ensure
    s&.close
  end

  # A pipeline, then a half-close, behind an unread answer that filled most
  # of the socket's send buffer: answers stay in the conn, requests in its
  # buffer, when the end of the input comes. The client reads only a moment
  # later (a slow reader): every answer reaches it before the close.
  def test_answers_reach_a_client_that_half_closes_before_reading_them
    s = server.unix
    # fast pipelined requests first: answers are held back again (the
    # worker's average of their app time is low, whatever ran before)
    s.write((1..64).map { |i| get("/p#{i}") }.join)
    64.times { HTTPClient.read_response(s) }
    first_kb = s.getsockopt(:SOCKET, :SNDBUF).int * 9 / 10 / 1024 # the server's socket has the same default
    s.write(get("/big?kb=#{first_kb}"))
    assert s.wait_readable(10), "no answer came"
    s.write((1..16).map { get("/big?kb=3") }.join + get("/never")[0, 8])
    s.shutdown(:WR)
    sleep 0.3 # the scenario, a client that reads late: the server meets the end of its input first
    assert_equal first_kb * 1024, HTTPClient.read_response(s)&.body&.bytesize, "the first answer"
    (1..16).each { |i| assert_equal 3072, HTTPClient.read_response(s)&.body&.bytesize, "answer #{i}" }
  ensure
    s&.close
  end

  # The next request is only half here: the answer before it goes out now.
  def test_an_answer_does_not_wait_for_the_rest_of_the_pipeline
    s = server.tcp
    nxt = get("/second")
    s.write(get("/first") + nxt[0, 10])
    res = HTTPClient.read_response(s, timeout: 5)
    assert_equal "/first", res&.body, "the first answer waited for the second request"
    s.write(nxt[10..])
    assert_equal "/second", HTTPClient.read_response(s).body
  ensure
    s&.close
  end

  # Held back only while the app answers pipelined requests in
  # microseconds: behind a slow app an answer leaves before the next
  # request's app call, not after it.
  def test_an_answer_does_not_wait_for_the_next_slow_request
    s = server.tcp
    s.write(get("/sleep?s=0.2") + get("/fast") + get("/sleep?s=3") + get("/end"))
    t0 = mono
    assert_equal "slept", HTTPClient.read_response(s).body
    assert_equal "/fast", HTTPClient.read_response(s, timeout: 10).body
    waited = mono - t0
    assert_operator waited, :<, 2.5, "the answer to /fast waited for the 3 s app call after it"
    assert_equal "slept", HTTPClient.read_response(s).body
    assert_equal "/end", HTTPClient.read_response(s).body
  ensure
    s&.close
  end
end
