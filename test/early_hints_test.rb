# frozen_string_literal: true

require "rack3_helper"

# env["rack.early_hints"]: 103 responses before the final one, HTTP/1.1 only.
class EarlyHintsTest < Minitest::Test
  include SharedServer
  server "rack3.ru", env: Rack3Files.server_env

  def raw_until_final(sock, path, version: "1.1")
    sock.write("GET #{path} HTTP/#{version}\r\nHost: t\r\n\r\n")
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    raw = +""
    raw << HTTPClient.read_line(sock, deadline) until raw.match?(/HTTP\/1.1 200 OK\r\n.*?\r\n\r\n/m)
    raw
  end

  def test_hints_come_before_the_final_response
    s = server.tcp
    raw = raw_until_final(s, "/hints")
    hints = raw.split("HTTP/1.1 200 OK\r\n").first
    assert_equal "HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload; as=style\r\n\r\n" \
                 "HTTP/1.1 103 Early Hints\r\nlink: </a.js>; rel=preload\r\nlink: </b.js>; rel=preload\r\n\r\n",
                 hints
    assert_equal "final", HTTPClient.read_bytes(s, 5, Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5)
    assert_equal 200, HTTPClient.request(s, "/pid").status, "the connection goes on"
  ensure
    s&.close
  end

  def test_no_hints_for_http10
    s = server.tcp
    s.write("GET /hints HTTP/1.0\r\n\r\n")
    res = HTTPClient.read_response(s)
    assert_equal 200, res.status
    assert_equal "no hints", res.body
    t = server.tcp
    t.write("GET /nolint/early-hints-http10 HTTP/1.0\r\n\r\n")
    assert_equal "false", HTTPClient.read_response(t).body
  ensure
    s&.close
    t&.close
  end

  def test_hint_fields_are_checked_like_the_final_responses
    s = server.tcp
    raw = raw_until_final(s, "/nolint/hints-bad")
    assert raw.start_with?("HTTP/1.1 103 Early Hints\r\nlink: </ok.css>\r\n\r\nHTTP/1.1 200 OK\r\n"), raw
    refute_match(/Injected|connection/i, raw)
    assert_match(/dropped response header "x-bad"/, server.log_until(/x-bad/))
    assert_equal "after bad hints", HTTPClient.read_bytes(s, 15, Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5)
  ensure
    s&.close
  end

  def test_hints_after_the_head_went_out_are_not_sent
    s = server.tcp
    s.write("GET /hints-late HTTP/1.1\r\nHost: t\r\n\r\n")
    data = +""
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    while (c = HTTPClient.read_some(s, 4096, deadline))
      data << c
    end
    assert data.start_with?("HTTP/1.1 200 OK\r\n"), data
    assert data.end_with?("\r\n\r\nbody"), data
    refute_includes data, "103"
  ensure
    s&.close
  end
end
