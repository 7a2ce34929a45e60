# frozen_string_literal: true

require "test_helper"

# max_worker_memory: a worker whose memory (PSS, else RSS) outgrows it is
# recycled between requests, logged; by default memory.max ÷ workers when
# the cgroup limits memory (a fake tree here: ORIBI_CGROUP_ROOT).
class WorkerMemoryTest < Minitest::Test
  MIB = 1 << 20
  LEAK = 10 # MiB per request

  def teardown
    @srv&.stop
    FileUtils.rm_rf(@root) if @root
  end

  def get(path)
    res = HTTPClient.request(@srv.tcp, path, headers: { "Connection" => "close" })
    [res.status, res.body[/pid (\d+)/, 1].to_i]
  end

  # Leaks LEAK MiB a request until the worker that answers is another one
  # (at most `max` requests); returns the statuses, the first pid and the
  # pids seen.
  def leak_until_recycled(max)
    statuses = []
    pids = []
    max.times do
      status, pid = get("/?mb=#{LEAK}")
      statuses << status
      pids << pid
      break if pids.uniq.size > 1
    end
    # The master looks once a second: the last leaks may be ahead of it.
    unless pids.uniq.size > 1
      wait_until(timeout: 10) do
        status, pid = get("/")
        statuses << status
        pids << pid
        pids.uniq.size > 1
      end
    end
    [statuses, pids]
  end

  # The worker leaks until recycled at 120 MiB, by `kind` (a pattern) of memory.
  def assert_recycled(kind, env: {})
    limit = 120 * MIB
    @srv = ServerProcess.new("leak.ru", "--max-worker-memory", limit.to_s, workers: 1, unix: false, env: env)
    statuses, pids = leak_until_recycled(40)
    assert_equal [200] * statuses.size, statuses, "a request failed across the recycling"
    assert_equal 2, pids.uniq.size, "the worker was not recycled after #{statuses.size} requests leaking #{LEAK} MiB each"
    line = @srv.log_until(/max_worker_memory/)[/^.*max_worker_memory.*$/]
    assert_match(/worker\[0\] pid #{pids.first}: #{kind} \d+\.\d MiB over max_worker_memory 120\.0 MiB after \d+ requests: recycling/, line)
    used = line[/(\d+\.\d) MiB over/, 1].to_f
    assert_operator used, :>, 120, line
    # Not before it outgrew the limit: it served leaks up to about it (the
    # master looks once a second, so how far past it depends on the pace).
    leaks = pids.take_while { |p| p == pids.first }.size
    assert_operator leaks * LEAK, :>=, 120 - 60, "recycled after #{leaks} leaks, below the limit"
    puts "\nrecycled after #{leaks} requests leaking #{LEAK} MiB each: #{line[/\w+ [\d.]+ MiB over/]} 120 MiB"
    # The new worker starts small and stays.
    status, pid = get("/")
    assert_equal [200, pids.last], [status, pid]
  end

  def test_a_leaking_worker_is_recycled_between_requests
    assert_recycled(Oribi::Platform.procfs? ? "(PSS|RSS)" : "RSS") # RSS where the kernel has no PSS
  end

  # Without /proc (ORIBI_PORTABLE=1 takes that path here): RSS from ps.
  def test_without_proc_a_leaking_worker_is_recycled_by_its_rss
    assert_recycled("RSS", env: { "ORIBI_PORTABLE" => "1" })
  end

  # With one worker, a recycled worker that drains (a client reading
  # nothing of a 30 MiB body holds it until write_timeout) must not leave
  # the listeners without a worker: its replacement serves meanwhile.
  def test_one_worker_is_replaced_while_it_drains
    @srv = ServerProcess.new("leak.ru", "--max-worker-memory", 150_000_000.to_s, workers: 1, unix: false)
    stalled = @srv.tcp
    stalled.write("GET /?body=30 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert wait_until { stalled.wait_readable(0) }, "the response began"
    status, old = get("/?mb=150")
    assert_equal 200, status
    assert_match(/worker\[0\] pid #{old}: \w+ [\d.]+ MiB over max_worker_memory/,
                 @srv.log_until(/over max_worker_memory/, timeout: 10))
    assert_replaced_while_it_drains(@srv, old, stalled)
    assert_equal [200], Array.new(3) { get("/").first }.uniq
    refute_match(/exited with status|killed by/, @srv.log)
  ensure
    stalled&.close
  end

  # With refork the mold keeps the index of the worker it was: the worker
  # forked from it in that place is measured all the same.
  def test_a_worker_forked_by_the_mold_is_recycled_too
    skip "no child subreaper in this build: no refork" unless Oribi.child_subreaper?
    @srv = ServerProcess.new("leak.ru", "--max-worker-memory", 150_000_000.to_s, "--refork-after", "3",
                             workers: 1, unix: false)
    3.times { assert_equal 200, get("/").first }
    mold = @srv.log_until(/is the mold of generation 1/, timeout: 10)[/pid (\d+) is the mold/, 1].to_i
    status, pid = get("/?mb=150")
    assert_equal 200, status
    refute_equal mold, pid
    assert_match(/worker\[0\] pid #{pid}: \w+ [\d.]+ MiB over max_worker_memory/,
                 @srv.log_until(/pid #{pid}: \w+ [\d.]+ MiB over/, timeout: 10))
  end

  def test_off_by_default_without_a_cgroup_limit
    @root = Dir.mktmpdir("oribi-cgroup")
    File.write(File.join(@root, "cgroup.controllers"), "cpu memory\n")
    File.write(File.join(@root, "memory.max"), "max\n")
    @srv = ServerProcess.new("leak.ru", workers: 1, unix: false, env: { "ORIBI_CGROUP_ROOT" => @root })
    pids = 12.times.map { get("/?mb=#{LEAK}").last }
    assert_equal 1, pids.uniq.size
    refute_match(/max_worker_memory/, @srv.log)
  end

  # memory.max 240 MiB with 2 workers: 120 MiB each, said at start.
  def test_the_default_is_memory_max_divided_by_the_workers
    @root = Dir.mktmpdir("oribi-cgroup")
    File.write(File.join(@root, "cgroup.controllers"), "cpu memory\n")
    File.write(File.join(@root, "memory.max"), "#{240 * MIB}\n")
    @srv = ServerProcess.new("leak.ru", workers: 2, unix: false, env: { "ORIBI_CGROUP_ROOT" => @root })
    assert_match(/max_worker_memory 120\.0 MiB per worker \(memory\.max #{240 * MIB} in #{@root} \/ 2 workers\)/,
                 @srv.log_until(/max_worker_memory/))
    # Keep-alive on one connection: the same worker until it is recycled.
    s = @srv.tcp
    pids = []
    30.times do
      res = HTTPClient.request(s, "/?mb=#{LEAK}")
      assert_equal 200, res.status
      pids << res.body[/pid (\d+)/, 1].to_i
      break if res["connection"] == "close"
    end
    s.close
    assert @srv.log_until(/over max_worker_memory 120\.0 MiB/, timeout: 10).match?(/over max_worker_memory/),
           "not recycled after #{pids.size} leaks of #{LEAK} MiB\n#{@srv.log}"
  end
end
