# frozen_string_literal: true

# CPU-bound: every request computes for about 3 ms, holding the GVL.
run lambda { |_env|
  deadline = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) + 0.003
  n = 0
  n += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) < deadline
  [200, { "content-type" => "text/plain" }, ["cpu #{n}\n"]]
}
