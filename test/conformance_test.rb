# frozen_string_literal: true

require "test_helper"
require_relative "support/corpus"
require_relative "support/tls"

# Replays test/corpus/requests.txt (raw requests with the expected reaction;
# the format is in support/corpus.rb) through real sockets, TCP, unix and
# TLS (an ssl:// listener of the same server), three ways:
#   alone       one case per connection;
#   after       a valid GET first, then the case, in one write: the GET gets
#               exactly its 200 and the case its own reaction;
#   before      the case, then a valid GET, in one write: the GET is served
#               after the case's answers unless the case closes, and then
#               nothing more comes.
# Responses from the echo app report the body length the app saw, checked
# against a case's `bodies:` line, and every app request is counted in the
# server's log: the app sees exactly the requests that were answered 200 —
# no bytes of one request are read as part of another. At the end the
# worker that took all of it is still the one answering.
class ConformanceTest < Minitest::Test
  include SharedServer
  TLS_DIR = Dir.mktmpdir("oribi-conformance")
  Minitest.after_run { FileUtils.rm_rf(TLS_DIR) }
  TLS_PORT = free_port
  TLS_CERT, TLS_KEY = TLSFiles.write(TLS_DIR, "server")
  server "echo.ru", "--max-body", "1048576", "-b", "ssl://127.0.0.1:#{TLS_PORT}?cert=#{TLS_CERT}&key=#{TLS_KEY}"

  CASES = Corpus::CASES
  FIRST = "GET /first HTTP/1.1\r\nHost: a\r\n\r\n"
  FOLLOW = "GET /follow-up HTTP/1.1\r\nHost: a\r\n\r\n"

  def setup
    @served = 0 # app requests this test caused (responses 200 from echo.ru)
  end

  def served_in_log = server.log.scan(/^served /).size

  def connect(transport) = transport == :tls ? TLSClient.open(TLS_PORT) : server.public_send(transport)

  def worker_pid(sock)
    res = HTTPClient.request(sock, "/pid")
    @served += 1
    res.body[/^pid: (\d+)/, 1]
  end

  def read(sock, what, head: false)
    res = HTTPClient.read_response(sock, timeout: 5, head: head)
    refute_nil res, "#{what}: connection closed before the response"
    @served += 1 if res.status == 200
    res
  end

  def assert_app_saw(res, what, path: nil, bytes: nil)
    assert_match(/^PATH_INFO: #{Regexp.escape(path)}$/, res.body, "#{what}: framing") if path
    assert_match(/^body-bytes: #{bytes}$/, res.body, "#{what}: body bytes the app saw") if bytes
  end

  # The case's own responses, then close or keep-alive as expected.
  def check_case(kase, sock, follow:)
    if kase.expect == ["timeout"]
      # an incomplete request gets no answer while the client may still send
      refute sock.wait_readable(0.3), "#{kase.name}: answered an incomplete request"
      return
    end
    close = kase.expect.last == "close"
    statuses = kase.expect.reject { |e| e == "close" }.map(&:to_i)
    bodies = kase.bodies&.dup
    statuses.each_with_index do |code, i|
      res = read(sock, "#{kase.name}: response #{i + 1}", head: i.zero? && kase.request.start_with?("HEAD"))
      assert_equal code, res.status, "#{kase.name}: response #{i + 1}"
      assert_app_saw(res, "#{kase.name}: response #{i + 1}", bytes: bodies.shift) if bodies && code == 200
    end
    if close
      rest = +""
      assert HTTPClient.closed?(sock), "#{kase.name}: connection should be closed"
      rest << (sock.read_nonblock(65_536, exception: false) || "") rescue nil # rubocop:disable Style/RescueModifier
      assert_empty rest, "#{kase.name}: bytes after the closing response"
    elsif follow == :sent
      res = read(sock, "#{kase.name}: pipelined follow-up")
      assert_equal 200, res.status, "#{kase.name}: pipelined follow-up"
      assert_app_saw(res, "#{kase.name}: pipelined follow-up", path: "/follow-up", bytes: 0)
    else
      # still in sync: a follow-up request on the same connection is answered
      sock.write(FOLLOW)
      res = read(sock, "#{kase.name}: follow-up")
      assert_equal 200, res.status, "#{kase.name}: follow-up"
      assert_app_saw(res, "#{kase.name}: follow-up", path: "/follow-up", bytes: 0)
    end
  rescue Errno::EPIPE, Errno::ECONNRESET => e
    flunk "#{kase.name}: #{e.class} before the expected responses"
  end

  def replay(kase, sock, mode)
    case mode
    when :alone
      sock.write(kase.request)
      check_case(kase, sock, follow: :later)
    when :after
      sock.write(FIRST + kase.request)
      res = read(sock, "#{kase.name}: the valid request before it")
      assert_equal 200, res.status, "#{kase.name}: the valid request before it"
      assert_app_saw(res, "#{kase.name}: the valid request before it", path: "/first", bytes: 0)
      check_case(kase, sock, follow: :later)
    when :before
      sock.write(kase.request + FOLLOW)
      check_case(kase, sock, follow: :sent)
    end
  end

  def test_corpus_is_large_enough
    assert_operator CASES.size, :>=, 200
    assert_equal CASES.size, CASES.map(&:name).uniq.size, "case names must be unique"
    valid = CASES.count { |k| k.expect.first == "200" }
    assert_operator valid, :>=, 50, "valid cases"
    assert_operator CASES.size - valid, :>=, 120, "invalid cases"
  end

  %i[tcp unix tls].each do |transport|
    %i[alone after before].each do |mode|
      define_method("test_corpus_#{mode}_over_#{transport}") do
        served_before = served_in_log
        pid = worker_pid(connect(transport))
        failures = []
        CASES.each do |kase|
          # an incomplete case followed by a request is a different request
          next if mode == :before && kase.expect == ["timeout"]

          sock = connect(transport)
          begin
            replay(kase, sock, mode)
          rescue Minitest::Assertion => e
            failures << e.message
          ensure
            sock.close
          end
        end
        assert_empty failures, failures.join("\n")
        assert_equal pid, worker_pid(connect(transport)), "the worker was replaced: it crashed"
        want = served_before + @served
        server.log_until(/\A(?:.*?^served ){#{want}}/m)
        assert_equal want, served_in_log, "requests the app saw vs. 200 responses"
      end
    end
  end
end
