# frozen_string_literal: true

# Server-Sent Events from ActionController::Live, in the format of
# test/support/sse_timing.rb (the app is copied away from it, so it is
# spelled out): each write is stamped and should reach the client before
# the next one is made.
class LiveController < ActionController::Base
  include ActionController::Live

  GAP = 0.4

  def events
    response.headers["Content-Type"] = "text/event-stream"
    Integer(params.fetch(:n, "3")).times do |i|
      sleep GAP if i.positive?
      response.stream.write("data: #{format('%.6f', Process.clock_gettime(Process::CLOCK_REALTIME))}\n\n")
    end
  ensure
    response.stream.close
  end
end
