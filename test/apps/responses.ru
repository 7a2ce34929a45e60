# frozen_string_literal: true

# Responses that test how the server writes what apps return; each path is a case.
require_relative "../support/sse_timing"

class Stream
  def initialize(chunks, fail_after: nil, on_close: nil)
    @chunks = chunks
    @fail_after = fail_after
    @on_close = on_close
  end

  def each
    @chunks.each_with_index do |c, i|
      raise "body failed" if @fail_after && i >= @fail_after

      yield c
    end
  end

  def close
    File.write(@on_close, "closed") if @on_close
  end
end

# Events written as they happen: each waits for its time before it is yielded.
class SSEBody
  def initialize(count) = @count = count

  def each
    @count.times do |i|
      sleep SSETiming::GAP if i.positive?
      yield SSETiming.event
    end
  end
end

run lambda { |env|
  q = Rack::Utils.parse_query(env["QUERY_STRING"])
  case env["PATH_INFO"]
  when "/crlf"
    [200, { "x-bad" => "a\r\nInjected: 1", "x-nul" => "a\0b", "x-good" => "ok",
            "bad name" => "x", "x-list" => ["1", "2\n3"] }, ["ok"]]
  when "/parts" # an Array body of q["n"] parts, each its own String
    [200, {}, Array.new(Integer(q["n"])) { |i| "#{i}," }]
  when "/nil-header" # `"x-rev" => ENV["GIT_REVISION"]` with the variable unset
    [200, { "x-rev" => nil, "content-type" => "text/plain" }, ["ok"]]
  when "/hop"
    [200, { "connection" => "close", "transfer-encoding" => "chunked", "keep-alive" => "timeout=5",
            "content-type" => "text/plain" }, ["hop"]]
  when "/status"
    [q["code"].to_i, { "content-length" => "5" }, ["body!"]]
  when "/stream"
    [200, {}, Stream.new(%w[alpha beta gamma])]
  when "/stream-length"
    [200, { "content-length" => "9" }, Stream.new(%w[abc def ghi])]
  when "/stream-short"
    [200, { "content-length" => "100" }, Stream.new(%w[abc])]
  when "/raise"
    raise "app failure"
  when "/raise-in-body" # the first chunk is large enough to be written at once
    [200, {}, Stream.new(["x" * 20_000, "two"], fail_after: 1)]
  when "/raise-before-write" # the body fails before its first chunk
    [200, {}, Stream.new(%w[one two], fail_after: 0)]
  when "/sse" # q["n"] events, SSETiming::GAP apart, each stamped when yielded
    [200, { "content-type" => "text/event-stream" }, SSEBody.new(Integer(q.fetch("n", "4")))]
  when "/close-marker"
    [200, {}, Stream.new(Array.new(2000) { "x" * 65_536 }, on_close: q["file"])]
  when "/big"
    [200, { "content-type" => "application/octet-stream" }, ["y" * (4 * 1024 * 1024)]]
  when "/date" # the app's own Date (Rack 3 lowercase, or as a Rack 2 app writes it)
    [200, { q.fetch("name", "date") => "Tue, 01 Jan 2030 00:00:00 GMT" }, ["d"]]
  when "/status-205"
    [205, { "content-type" => "text/plain" }, ["not for a 205"]]
  when "/cookies"
    [200, { "set-cookie" => ["a=1; path=/", "b=2"] }, ["c"]]
  when "/bad-status"
    ["200", {}, ["x"]]
  when "/mistake" # a response shape Rack 3 does not allow, one per kind
    case q["kind"]
    when "huge-status" then [(2**31) + 200, {}, ["x"]]
    when "negative-status" then [-(2**31) - 5, {}, ["x"]]
    when "bignum-status" then [2**64, {}, ["x"]]
    when "status-600" then [600, {}, ["x"]]
    when "status-99" then [99, {}, ["x"]]
    when "float-status" then [200.0, {}, ["x"]]
    when "headers-array" then [200, [%w[x-a 1]], ["x"]]
    when "body-nil" then [200, {}, nil]
    when "body-int-element" then [200, {}, [1]]
    when "not-an-array" then Object.new
    when "to-ary-raises" then Class.new { def to_ary = raise("to_ary failed") }.new
    else [200, {}, ["unknown kind"]]
    end
  when "/rack-key"
    [200, { "rack.internal" => "x", "x-ok" => "1" }, ["r"]]
  when "/pid"
    [200, {}, [Process.pid.to_s]]
  else
    [404, {}, ["not found"]]
  end
}
