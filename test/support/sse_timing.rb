# frozen_string_literal: true

# Server-Sent Events read as they arrive. Each event is "data: STAMP\n\n",
# STAMP being the app's CLOCK_REALTIME when it wrote the event; client and
# server share the clock, so arrival minus stamp is how long the server
# (and any proxy) held the event back.
module SSETiming
  EVENT = /data: (\d+\.\d+)\n\n/
  GAP = 0.4 # seconds the apps wait between events
  LATE = 0.1 # an event held back longer than this was not streamed

  module_function

  def event = "data: #{format('%.6f', Process.clock_gettime(Process::CLOCK_REALTIME))}\n\n"

  # Reads until the response ends (EOF, or the last chunk of a chunked
  # body); [[stamp, seconds late], ...] and the raw bytes.
  def read(sock, timeout: 10)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    raw = +""
    events = []
    until raw.end_with?("\r\n0\r\n\r\n")
      data = HTTPClient.read_some(sock, 65_536, deadline) or break
      now = Process.clock_gettime(Process::CLOCK_REALTIME)
      raw << data
      raw.scan(EVENT).drop(events.size).each { |(stamp)| events << [stamp, now - Float(stamp)] }
    end
    [events, raw]
  end

  # The body of a chunked response, checking its framing on the way.
  def dechunk(raw)
    rest = raw.split("\r\n\r\n", 2).last
    body = +""
    loop do
      size_line, rest = rest.split("\r\n", 2)
      size = Integer(size_line, 16)
      return body if size.zero? && rest == "\r\n"
      raise "bad chunk framing at #{rest.inspect}" unless rest.byteslice(size, 2) == "\r\n"

      body << rest.byteslice(0, size)
      rest = rest.byteslice(size + 2..)
    end
  end

  # Every one of count events came within LATE of its write.
  def assert_streamed(test, events, count, what)
    test.assert_equal count, events.size, "#{what}: events #{events.inspect}"
    late = events.reject { |_, lag| lag < LATE }
    test.assert_empty late, "#{what}: events held back (stamp, seconds late)"
  end
end
