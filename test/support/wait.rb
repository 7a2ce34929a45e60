# frozen_string_literal: true

# Polls a condition until it holds or timeout passes; returns its last value.
def wait_until(timeout: 5, interval: 0.01)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
  loop do
    v = yield
    return v if v || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

    sleep interval
  end
end
