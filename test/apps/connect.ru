# frozen_string_literal: true

# CONNECT answered each way an app can, under Rack::Lint; the authority
# says which:
#   full.test:443     full hijack: the app writes its own 200, then echoes
#                     (the tunnel), from a thread that starts once the
#                     server is done with the request
#   partial.test:443  a 200 with a rack.hijack response header, then the echo
#   plain.test:443    a 200 with a body, the socket not taken
#   deny.test:443     a 403
# Anything else is answered "METHOD PATH". Every request the app sees is
# logged ("app saw METHOD PATH"): a test can tell what got through.
require "rack"

# A byte at a time: read(1) is what Lint's wrapper of a partial hijack's
# socket has that returns before a buffer fills.
echo = lambda do |io|
  while (byte = io.read(1))
    io.write(byte)
  end
rescue IOError, SystemCallError
  nil
ensure
  io.close unless io.closed?
end

app = lambda do |env|
  env["rack.errors"].puts("app saw #{env['REQUEST_METHOD']} #{env['PATH_INFO']}")
  env["rack.errors"].flush
  next [200, { "content-type" => "text/plain" }, ["#{env['REQUEST_METHOD']} #{env['PATH_INFO']}"]] unless env["REQUEST_METHOD"] == "CONNECT"

  case env["PATH_INFO"]
  when "full.test:443"
    io = env["rack.hijack"].call
    go = Queue.new
    env["rack.response_finished"] << ->(*) { go << true }
    Thread.new do
      go.pop
      io.write("HTTP/1.1 200 Connection Established\r\n\r\n")
      echo.call(io)
    end
    [200, {}, []] # ignored after a full hijack
  when "partial.test:443"
    [200, { "rack.hijack" => ->(io) { Thread.new { echo.call(io) } } }, []] # the worker goes on meanwhile
  when "deny.test:443"
    [403, { "content-type" => "text/plain" }, ["denied"]]
  else
    [200, { "content-type" => "text/plain" }, ["no tunnel here"]]
  end
end

run Rack::Lint.new(app)
