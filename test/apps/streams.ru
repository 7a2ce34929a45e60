# frozen_string_literal: true

# Responses that stay open. /sse?n=N&every=S is an event stream whose body
# (an each that is no Array) yields N events S seconds apart, sleeping in
# between; /call?n=N&every=S the same written by a callable body
# (body.call(stream)); /forever an event a second until the client or the
# server ends it; /big?n=N writes N events of 64 KiB at once to the stream
# (for a client that reads nothing). Each logs "stream begun" once its app call returned.
# /who answers whether the body ran on the thread that called the app; / is
# a hello.
class Events
  def initialize(n, every, size = 0)
    @n = n
    @every = every
    @pad = "x" * size
  end

  def each
    warn "stream begun"
    @n.times do |i|
      yield "data: #{i}#{@pad}\n\n"
      sleep @every
    end
  end
end

class Who
  def initialize = @thread = Thread.current

  def each = yield(Thread.current.equal?(@thread) ? "same thread" : "another thread")
end

SSE = { "content-type" => "text/event-stream" }.freeze

run lambda { |env|
  q = Rack::Utils.parse_query(env["QUERY_STRING"])
  n = (q["n"] || 3).to_i
  every = (q["every"] || 0.3).to_f
  case env["PATH_INFO"]
  when "/sse" then [200, SSE.dup, Events.new(n, every)]
  when "/forever" then [200, SSE.dup, Events.new(1_000_000, 1)]
  when "/big"
    event = "data: #{'x' * 65_536}\n\n"
    [200, SSE.dup, lambda do |stream|
      warn "stream begun"
      n.times { stream.write(event) }
    ensure
      stream.close
    end]
  when "/call"
    body = lambda do |stream|
      warn "stream begun"
      n.times do |i|
        stream.write("data: #{i}\n\n")
        sleep every
      end
    ensure
      stream.close
    end
    [200, SSE.dup, body]
  when "/who" then [200, {}, Who.new]
  else [200, {}, ["hello"]]
  end
}
