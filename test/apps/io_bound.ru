# frozen_string_literal: true

# IO-bound: every request waits 50 ms (as on a slow database), using no
# CPU; long enough that scheduling delays on a busy machine stay small beside it.
# rack.multithread is in the body so a test can tell whether the server
# runs the app on several threads.
run lambda { |env|
  sleep 0.05
  [200, { "content-type" => "text/plain" }, ["io multithread=#{env['rack.multithread']}\n"]]
}
