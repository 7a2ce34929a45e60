# frozen_string_literal: true

# A typical web request: it waits 100 ms on an upstream call (a database,
# another service: sleep stands in for it, holding no CPU and no GVL),
# then burns 5 ms of CPU rendering the answer (holding the GVL). One
# thread serves at most 1 / 105 ms ≈ 9.5 req/s; one worker at most
# 1 / 5 ms = 200 req/s (one core, the GVL), two workers twice that on 2
# CPUs, less what the load generator takes.
run lambda { |_env|
  sleep 0.1
  deadline = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) + 0.005
  n = 0
  n += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) < deadline
  [200, { "content-type" => "text/plain" }, ["upstream #{n}\n"]]
}
