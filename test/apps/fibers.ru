# frozen_string_literal: true

require "net/http"

# Requests that wait, for fibers mode: /wait sleeps 1 s; /upstream?port=P
# asks a local upstream over Net::HTTP and answers with its body; /pop
# waits on a Queue that /push fills; /sse streams three events 0.3 s
# apart; /forever an event a second; /local sets a fiber local (Thread#[])
# and answers with what was there before; /echo waits 0.2 s and answers
# with its body and its X-F-* header fields; / is a hello that says
# rack.multithread. Each wait logs "waiting" when it begins.
QUEUE = Thread::Queue.new

class Events
  def initialize(n, every)
    @n = n
    @every = every
  end

  def each
    warn "waiting"
    @n.times do |i|
      yield "data: #{i}\n\n"
      sleep @every
    end
  end
end

run lambda { |env|
  q = Rack::Utils.parse_query(env["QUERY_STRING"])
  case env["PATH_INFO"]
  when "/wait"
    warn "waiting"
    sleep 1
    [200, {}, ["waited"]]
  when "/upstream"
    warn "waiting"
    [200, {}, [Net::HTTP.get(URI("http://127.0.0.1:#{q['port']}/"))]]
  when "/pop"
    warn "waiting"
    [200, {}, ["popped #{QUEUE.pop}"]]
  when "/echo"
    warn "waiting"
    sleep 0.2
    fields = env.keys.grep(/\AHTTP_X_F_/).sort_by { |k| k[/\d+/].to_i }.map { |k| "#{k}=#{env[k]}" }
    [200, {}, ["#{env['REQUEST_METHOD']} #{env['rack.input'].read} #{fields.join(' ')}"]]
  when "/push"
    QUEUE << q["v"]
    [200, {}, ["pushed"]]
  when "/sse" then [200, { "content-type" => "text/event-stream" }, Events.new(3, 0.3)]
  when "/forever" then [200, { "content-type" => "text/event-stream" }, Events.new(1_000_000, 1)]
  when "/local"
    before = Thread.current[:oribi_test_local]
    Thread.current[:oribi_test_local] = "set"
    [200, {}, ["before=#{before.inspect}"]]
  else [200, {}, ["hello multithread=#{env['rack.multithread']}"]]
  end
}
