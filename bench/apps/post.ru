# frozen_string_literal: true

# Reads a request body (the suite POSTs 64 KiB) and answers its size: the
# server's body buffering and rack.input.
run lambda { |env|
  input = env["rack.input"] # may be nil without a body (Rack 3)
  size = 0
  buf = +""
  size += buf.bytesize while input&.read(16_384, buf)
  [200, { "content-type" => "text/plain" }, ["#{size}\n"]]
}
