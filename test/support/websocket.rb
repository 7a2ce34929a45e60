# frozen_string_literal: true

require "base64"
require "digest/sha1"

# Just enough RFC 6455 for the hijack tests: the handshake key, and frames
# with payloads under 64 KiB (text, close), masked from the client.
module WebSocket
  GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
  TEXT = 0x1
  CLOSE = 0x8

  module_function

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
