# frozen_string_literal: true

# A CPU-bound app for bench/threads.rb: each request computes for about
# 2 ms holding the GVL, so threads cannot add throughput, only cost.
run lambda { |_env|
  x = 0
  i = 0
  while i < 70_000
    x += i * i
    i += 1
  end
  [200, { "content-type" => "text/plain" }, ["#{x}\n"]]
}
