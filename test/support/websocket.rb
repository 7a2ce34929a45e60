# frozen_string_literal: true

require "base64"
require "digest/sha1"

# Just enough RFC 6455 for the hijack tests and an Action Cable client
# (test/rails8_app_test.rb): the handshake, and frames (text, close),
# masked from the client.
module WebSocket
  GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
  TEXT = 0x1
  CLOSE = 0x8

  # decode reads with read(n); this one gives up at a deadline.
  Reader = Struct.new(:sock, :deadline) do
    def read(n) = HTTPClient.read_bytes(sock, n, deadline)
  end

  module_function

  # A client's upgrade request: key is the Sec-WebSocket-Key, headers
  # (Origin, Sec-WebSocket-Protocol, ...) go with it.
  def upgrade_request(path, host:, key:, headers: {})
    h = { "Host" => host, "Upgrade" => "websocket", "Connection" => "Upgrade", "Sec-WebSocket-Key" => key,
          "Sec-WebSocket-Version" => "13" }.merge(headers)
    "GET #{path} HTTP/1.1\r\n#{h.map { |k, v| "#{k}: #{v}\r\n" }.join}\r\n"
  end

  def accept(key) = Base64.strict_encode64(Digest::SHA1.digest(key + GUID))

  def handshake_headers(env)
    { "upgrade" => "websocket", "sec-websocket-accept" => accept(env["HTTP_SEC_WEBSOCKET_KEY"]) }
  end

  # The raw 101 for an app that writes it itself (full hijack).
  def handshake_response(env)
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" \
      "Sec-WebSocket-Accept: #{accept(env['HTTP_SEC_WEBSOCKET_KEY'])}\r\n\r\n"
  end

  def encode(payload, opcode: TEXT, mask: nil)
    payload = payload.b
    head = [0x80 | opcode].pack("C")
    len = payload.bytesize
    mbit = mask ? 0x80 : 0
    head << (len < 126 ? [mbit | len].pack("C") : [mbit | 126, len].pack("Cn"))
    return head + payload unless mask

    head + mask + payload.bytes.each_with_index.map { |b, i| b ^ mask.getbyte(i % 4) }.pack("C*")
  end

  # [opcode, payload] read from io with read(n); nil at EOF.
  def decode(io)
    head = io.read(2) or return nil
    b0, b1 = head.unpack("CC")
    len = b1 & 0x7f
    len = io.read(2).unpack1("n") if len == 126
    len = io.read(8).unpack1("Q>") if len == 127
    mask = (b1 & 0x80).zero? ? nil : io.read(4)
    payload = len.zero? ? +"" : io.read(len)
    payload = payload.bytes.each_with_index.map { |b, i| b ^ mask.getbyte(i % 4) }.pack("C*") if mask
    [b0 & 0x0f, payload]
  end

  # Echoes text frames until a close frame (answered) or EOF, then closes io.
  def echo(io)
    while (frame = decode(io))
      opcode, payload = frame
      if opcode == CLOSE
        io.write(encode(payload, opcode: CLOSE))
        break
      end
      io.write(encode("echo: #{payload}"))
    end
  ensure
    io.close
  end
end
