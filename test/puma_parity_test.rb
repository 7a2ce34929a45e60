# frozen_string_literal: true

require "test_helper"

# The same requests to Oribi and to Puma (the server most apps move from),
# serving the same app: status, end-to-end headers and body must agree.
# Framing may differ where both are correct (Puma chunks a body Oribi
# gives a length to), so content-length/transfer-encoding/connection/date
# are compared apart.
class PumaParityTest < Minitest::Test
  REQUESTS = {
    "cookies" => "GET /cookies HTTP/1.1\r\nHost: example.com\r\n\r\n",
    "headers" => "GET /headers?x=1 HTTP/1.1\r\nHost: example.com:8080\r\n\r\n",
    "head" => "HEAD /headers HTTP/1.1\r\nHost: example.com\r\n\r\n",
    "options-star" => "OPTIONS * HTTP/1.1\r\nHost: example.com\r\n\r\n",
    "options-path" => "OPTIONS /x HTTP/1.1\r\nHost: example.com\r\n\r\n",
    "empty" => "GET /empty HTTP/1.1\r\nHost: example.com\r\n\r\n",
    "redirect" => "GET /redirect HTTP/1.1\r\nHost: example.com\r\n\r\n",
    # (Without a Host, Puma says localhost:80; Oribi names the listener the
    # client reached, e.g. 127.0.0.1:PORT — a deliberate difference.)
    "http10" => "GET /x HTTP/1.0\r\nHost: example.com\r\n\r\n",
    "stream" => "GET /stream HTTP/1.1\r\nHost: example.com\r\n\r\n",
    "post" => "POST /p HTTP/1.1\r\nHost: example.com\r\nContent-Length: 3\r\n\r\nabc",
  }.freeze
  FRAMING = %w[date content-length transfer-encoding connection].freeze

  def self.puma_available?
    Gem::Specification.find_by_name("puma")
  rescue Gem::MissingSpecError
    false
  end

  def setup
    skip "puma is not installed (bundle install installs it with the peers group)" unless self.class.puma_available?
    @port = free_port
    @puma = Oribi::ProcessGroup.new([RbConfig.ruby, "-S", "puma", "-q", "-t", "1:1", "-b", "tcp://127.0.0.1:#{@port}",
                                     File.join(APPS, "parity.ru")], log: File::NULL)
    assert wait_until(timeout: 20, interval: 0.05) { listens_on?(@puma, @port) }, "puma did not start"
    @oribi = ServerProcess.new("parity.ru", unix: false)
  end

  def teardown
    @oribi&.stop
    @puma&.stop(:KILL, timeout: 0)
  end

  def ask(port, raw)
    s = TCPSocket.new("127.0.0.1", port)
    s.write(raw)
    HTTPClient.read_response(s, head: raw.start_with?("HEAD"))
  ensure
    s&.close
  end

  REQUESTS.each do |name, raw|
    define_method("test_#{name}") do
      ours = ask(@oribi.port, raw)
      puma = ask(@port, raw)
      assert_equal puma.status, ours.status, "status"
      assert_equal puma.headers.except(*FRAMING), ours.headers.except(*FRAMING), "headers"
      assert_equal puma.body, ours.body, "body"
      # where Puma announces a length, ours is the same
      assert_equal puma["content-length"], ours["content-length"] if puma["content-length"] && ours["content-length"]
    end
  end
end
