# frozen_string_literal: true

# A WebSocket echo three ways, under Rack::Lint:
#   /full      full hijack: the app writes the 101 itself, from a thread that
#              starts only once the server is done with the request
#   /partial   partial hijack: a 101 with a rack.hijack response header
#   /protocol  the Rack 3 way: a rack.protocol response header and a
#              streaming body
# /protocols shows env["rack.protocol"]; /nolint/unoffered answers with a
# rack.protocol the request did not offer.
require "rack"
require File.expand_path("../support/websocket", __dir__)

app = lambda do |env|
  case env["PATH_INFO"]
  when "/full"
    io = env["rack.hijack"].call
    go = Queue.new
    env["rack.response_finished"] << ->(*) { go << true }
    Thread.new do
      go.pop # the server has finished with the request: from here it must not touch io
      io.write(WebSocket.handshake_response(env))
      WebSocket.echo(io)
    end
    [200, {}, []] # ignored after a full hijack
  when "/partial"
    [101, WebSocket.handshake_headers(env).merge("rack.hijack" => ->(io) { WebSocket.echo(io) }), []]
  when "/protocol"
    headers = WebSocket.handshake_headers(env).merge("rack.protocol" => "websocket")
    headers.delete("upgrade") # rack.protocol says it
    [200, headers, ->(stream) { WebSocket.echo(stream) }]
  when "/protocols"
    [200, {}, [env["rack.protocol"].inspect]]
  when "/hijack-class"
    io = env["rack.hijack"].call
    body = "#{io.class.name} #{io.equal?(env['rack.hijack'].call) ? 'same' : 'another'}"
    io.write("HTTP/1.1 200 OK\r\nContent-Length: #{body.bytesize}\r\nConnection: close\r\n\r\n#{body}")
    io.close
    [200, {}, []]
  when "/partial-200" # partial hijack without an upgrade: the app writes the body and closes
    [200, { "content-type" => "text/plain", "rack.hijack" => ->(io) { io.write("raw body"); io.close } }, []]
  when "/late-hijack" # too late once the head is out
    [200, {}, lambda { |stream|
      begin
        env["rack.hijack"].call
        stream.write("hijacked")
      rescue IOError => e
        stream.write("refused: #{e.class}")
      end
    }]
  when "/ping"
    [200, {}, ["pong #{Process.pid}"]]
  else
    [404, {}, []]
  end
end

map("/nolint") do
  run lambda { |env|
    [200, { "rack.protocol" => "websocket", "content-type" => "text/plain" }, ["not upgraded #{env['rack.protocol'].inspect}"]]
  }
end
map("/") { run Rack::Lint.new(app) }
