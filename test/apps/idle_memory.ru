# frozen_string_literal: true

# Responses whose size a client picks, from bodies built once at boot, so
# that what a request leaves behind in the worker is the server's alone.
BODIES = Hash.new { |h, mib| h[mib] = ("y" * (mib * 1024 * 1024)).freeze }
BODIES[8]

run lambda { |env|
  GC.start if env["PATH_INFO"] == "/gc" # what requests left behind in Ruby's heap goes first
  mib = env["QUERY_STRING"][/\Amib=(\d+)\z/, 1]
  body = mib ? BODIES[[mib.to_i, 8].min] : "ok"
  [200, { "content-type" => "application/octet-stream" }, [body]]
}
