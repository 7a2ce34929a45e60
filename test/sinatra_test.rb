# frozen_string_literal: true

require "test_helper"
require "framework_process"
require_relative "support/sse_timing"

# A classic Sinatra app that picks Oribi with `set :server, :oribi` and is
# started as its users start it: `ruby app.rb -p PORT -o HOST`. Sinatra
# keeps what the handler yields and calls #stop on it when it quits.
class SinatraTest < Minitest::Test
  APP = File.join(APPS, "sinatra", "app.rb")

  def setup = FrameworkProcess.require_gem(self, "sinatra")

  def sinatra(workers)
    FrameworkProcess.new(env: { "WORKERS" => workers.to_s, "APP_ENV" => "development" }) do |port|
      [RbConfig.ruby, APP, "-p", port.to_s, "-o", "127.0.0.1"]
    end
  end

  def get(srv, path, **kw)
    HTTPClient.request(srv.tcp, path, headers: { "Host" => "127.0.0.1:#{srv.port}" }, **kw)
  end

  def check_serves_and_stops(workers)
    srv = sinatra(workers)
    res = get(srv, "/")
    assert_equal 200, res.status, res.body
    assert_equal "Sinatra on Oribi: multiprocess=#{workers > 1}", res.body
    res = get(srv, "/echo", method: "POST", body: "msg=hello+there",
                            headers: { "Host" => "127.0.0.1:#{srv.port}",
                                       "Content-Type" => "application/x-www-form-urlencoded" })
    assert_equal "hello there", res.body
    check_stream(srv)
    log = srv.log
    assert_match(/has taken the stage on #{srv.port} for development with backup from Oribi/, log)
    assert_match(/#{workers} workers?/, log)
    st = srv.stop
    assert st.success?, "TERM gave #{st.inspect}:\n#{log}"
  ensure
    srv&.stop
  end

  # Sinatra's stream helper: each << reaches the client as it is made.
  def check_stream(srv)
    s = srv.tcp
    s.write("GET /events?n=3 HTTP/1.1\r\nHost: 127.0.0.1:#{srv.port}\r\n\r\n")
    events, raw = SSETiming.read(s)
    assert_match(%r{\AHTTP/1.1 200 }, raw)
    SSETiming.assert_streamed(self, events, 3, "Sinatra stream")
    assert_equal events.map { |stamp, _| "data: #{stamp}\n\n" }.join, SSETiming.dechunk(raw)
  ensure
    s&.close
  end

  def test_single_process
    check_serves_and_stops(1)
  end

  def test_prefork
    check_serves_and_stops(2)
  end
end
