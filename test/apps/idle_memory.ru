# frozen_string_literal: true

# Responses whose size a client picks, from bodies built once at boot, so
# that what a request leaves behind in the worker is the server's alone.
BODIES = Hash.new { |h, mib| h[mib] = ("y" * (mib * 1024 * 1024)).freeze }
BODIES[8]

# /?head=1 answers with a 1 MiB header field (/?head=0 without it).
HEAD_FIELD = ("h" * (1 << 20)).freeze

# /gc: what requests left behind goes first, from Ruby's heap and then
# from the allocator's free lists (glibc's malloc_trim), so that the RSS
# read after it is memory something holds, not memory kept for reuse.
require "fiddle"
MALLOC_TRIM = begin
  Fiddle::Function.new(Fiddle.dlopen(nil)["malloc_trim"], [Fiddle::TYPE_SIZE_T], Fiddle::TYPE_INT)
rescue Fiddle::DLError
  nil # not glibc
end

run lambda { |env|
  if env["PATH_INFO"] == "/gc"
    GC.start
    MALLOC_TRIM&.call(0)
  end
  q = env["QUERY_STRING"]
  mib = q[/\Amib=(\d+)\z/, 1]
  body = mib ? BODIES[[mib.to_i, 8].min] : "ok"
  headers = { "content-type" => "application/octet-stream" }
  headers["x-big"] = HEAD_FIELD if q == "head=1"
  [200, headers, [body]]
}
