# frozen_string_literal: true

require "test_helper"
require_relative "../bench/slow_clients"

# min_body_rate: a body that comes slower than the minimum on average
# (after a 5 s grace) gets 408 and a close. A connection past its head is
# never shed, and body_timeout only asks for 8 KiB per timeout (~270 B/s
# at 30 s), so clients trickling bodies at ~300 B/s could hold every
# connection of a server ("slow POST"). An upload at a few KiB/s is served.
class BodyRateTest < Minitest::Test
  GRACE = 5.0
  SLOW = 20 # clients at ~300 B/s
  CHUNK = 30 # bytes per tick
  TICK = 0.1

  # Drives every socket from one thread: each gets its chunk every tick
  # until it has sent total bytes or got an answer; → each one's [status,
  # seconds from its start to the answer].
  def drive(socks, chunk:, total:, deadline:)
    started = now
    sent = Array.new(socks.size, 0)
    answers = Array.new(socks.size)
    next_tick = started
    while answers.include?(nil) && now - started < deadline
      if now >= next_tick
        socks.each_with_index do |s, i|
          next if answers[i] || sent[i] >= total

          sent[i] += s.write_nonblock("x" * [chunk, total - sent[i]].min, exception: false).then { _1.is_a?(Integer) ? _1 : 0 }
        rescue SystemCallError, IOError
          sent[i] = total # the server hung up: its answer is read below
        end
        next_tick += TICK
      end
      open = socks.each_index.reject { |i| answers[i] }
      ready, = IO.select(open.map { |i| socks[i] }, nil, nil, [next_tick - now, 0.001].max)
      (ready || []).each do |s|
        status = SlowClients.answer(s)
        next if status == :wait_readable

        answers[socks.index(s)] = [status, now - started]
      end
    end
    answers
  end

  def test_slow_bodies_get_408_after_the_grace_and_fast_ones_are_served
    srv = ServerProcess.new("echo.ru", workers: 1)
    slow = Array.new(SLOW) { srv.tcp.tap { |s| s.write("POST /slow HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n") } }
    # 4 KiB/s for 6 s: past the grace, well above the minimum
    fast = Array.new(2) { srv.unix.tap { |s| s.write("POST /fast HTTP/1.1\r\nHost: a\r\nContent-Length: 24000\r\n\r\n") } }
    t = Thread.new { drive(fast, chunk: 400, total: 24_000, deadline: 20) }
    answers = drive(slow, chunk: CHUNK, total: 1_000_000, deadline: 20)
    answers.each_with_index do |(status, secs), i|
      assert_equal 408, status, "slow client #{i}: #{status.inspect} after #{secs&.round(1)} s"
      assert_operator secs, :>=, GRACE - 0.5, "slow client #{i} cut before the grace"
      assert_operator secs, :<, GRACE + 5, "slow client #{i} cut late"
    end
    assert_equal [200, 200], t.value.map(&:first), "the fast uploads"
    assert_match(/answered 408 to \d+ request\(s\) whose body came slower than min_body_rate \(1024 bytes\/s\)/, srv.log)
    refute_match(%r{served POST /slow}, srv.log)
  ensure
    slow&.each(&:close)
    fast&.each(&:close)
    srv&.stop
  end

  def test_zero_turns_the_minimum_off
    srv = ServerProcess.new("echo.ru", "--min-body-rate", "0", "--body-timeout", "20", workers: 0)
    s = srv.tcp
    s.write("POST /slow HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n")
    status, = drive([s], chunk: CHUNK, total: 1_000_000, deadline: GRACE + 3).first
    assert_nil status, "a slow body was cut with the minimum off"
  ensure
    s&.close
    srv&.stop
  end
end
