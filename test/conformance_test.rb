# frozen_string_literal: true

require "test_helper"

# Replays test/corpus/requests.txt (raw requests with the expected reaction)
# through real sockets, TCP and unix, one connection per case. At the end
# the worker that took all of it is still the one answering.
class ConformanceTest < Minitest::Test
  include SharedServer
  server "echo.ru", "--max-body", "1048576"

  Case = Struct.new(:name, :expect, :request)

  def self.unescape(line)
    line.gsub(/\\(x[0-9a-fA-F]{2}|[rnt0\\])/) do
      esc = Regexp.last_match(1)
      case esc
      when "r" then "\r"
      when "n" then "\n"
      when "t" then "\t"
      when "0" then "\0"
      when "\\" then "\\"
      else esc[1..].to_i(16).chr
      end
    end
  end

  def self.load_corpus(path)
    File.read(path).split(/^### /).drop(1).map do |block|
      lines = block.lines.map(&:chomp)
      name = lines.shift[/\A[^:]+/]
      expect = lines.shift.delete_prefix("expect: ").split
      request = lines.map { |l| unescape(l) }.join.b
      Case.new(name, expect, request)
    end
  end

  CASES = load_corpus(File.join(__dir__, "corpus/requests.txt"))

  def self.worker_pid_before = @worker_pid_before ||= nil

  def worker_pid(sock)
    res = HTTPClient.request(sock, "/pid")
    res.body[/^pid: (\d+)/, 1]
  end

  def check(kase, sock)
    sock.write(kase.request)
    if kase.expect == ["timeout"]
      # an incomplete request gets no answer while the client may still send
      refute sock.wait_readable(0.3), "#{kase.name}: answered an incomplete request"
      return
    end
    close = kase.expect.last == "close"
    statuses = kase.expect.reject { |e| e == "close" }.map(&:to_i)
    statuses.each_with_index do |code, i|
      res = HTTPClient.read_response(sock, timeout: 5, head: kase.request.start_with?("HEAD"))
      refute_nil res, "#{kase.name}: connection closed before response #{i + 1}"
      assert_equal code, res.status, "#{kase.name}: response #{i + 1}"
    end
    if close
      assert HTTPClient.closed?(sock), "#{kase.name}: connection should be closed"
    else
      # still in sync: a follow-up request on the same connection is answered
      res = HTTPClient.request(sock, "/follow-up")
      refute_nil res, "#{kase.name}: closed instead of answering a follow-up"
      assert_equal 200, res.status, "#{kase.name}: follow-up"
      assert_match(%r{^PATH_INFO: /follow-up$}, res.body, "#{kase.name}: follow-up framing")
    end
  rescue Errno::EPIPE, Errno::ECONNRESET => e
    flunk "#{kase.name}: #{e.class} before the expected responses"
  end

  def test_corpus_is_large_enough
    assert_operator CASES.size, :>=, 80
    assert_equal CASES.size, CASES.map(&:name).uniq.size, "case names must be unique"
  end

  %i[tcp unix].each do |transport|
    define_method("test_corpus_over_#{transport}") do
      pid = worker_pid(server.public_send(transport))
      failures = []
      CASES.each do |kase|
        sock = server.public_send(transport)
        begin
          check(kase, sock)
        rescue Minitest::Assertion => e
          failures << e.message
        ensure
          sock.close
        end
      end
      assert_empty failures, failures.join("\n")
      assert_equal pid, worker_pid(server.public_send(transport)), "the worker was replaced: it crashed"
    end
  end
end
