# frozen_string_literal: true

# Leaks memory on purpose: ?mb=N keeps N more MiB (written, so resident)
# for the life of the worker. The body names the worker; ?body=N makes it
# N MiB longer (for a client that reads none of it).
LEAKED = []
run lambda { |env|
  mb = env["QUERY_STRING"][/mb=(\d+)/, 1].to_i
  LEAKED << ("x" * (mb << 20)) if mb.positive?
  pad = env["QUERY_STRING"][/body=(\d+)/, 1].to_i
  return [200, { "content-type" => "text/plain" }, ["pid #{Process.pid}\n", "y" * (pad << 20)]] if pad.positive?

  [200, { "content-type" => "text/plain" }, ["pid #{Process.pid} leaked #{LEAKED.sum(&:bytesize) >> 20}\n"]]
}
