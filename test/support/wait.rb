# frozen_string_literal: true

# Seconds on the monotonic clock: what the tests time and wait with.
def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

# Polls a condition until it holds or timeout passes; returns its last value.
def wait_until(timeout: 5, interval: 0.01)
  deadline = now + timeout
  loop do
    v = yield
    return v if v || now > deadline

    sleep interval
  end
end
