# frozen_string_literal: true

# IO-bound: every request waits 20 ms (as on a database), using no CPU.
# rack.multithread is in the body so a test can tell whether the server
# runs the app on several threads.
run lambda { |env|
  sleep 0.02
  [200, { "content-type" => "text/plain" }, ["io multithread=#{env['rack.multithread']}\n"]]
}
