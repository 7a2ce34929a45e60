# frozen_string_literal: true

# An IO-bound app for bench/threads.rb: each request waits 10 ms (a database
# call, say) without using the CPU, so one thread serves at most 100 req/s.
run lambda { |_env|
  sleep 0.01
  [200, { "content-type" => "text/plain" }, ["slept 10 ms\n"]]
}
