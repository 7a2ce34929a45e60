# frozen_string_literal: true

require_relative "support/bench_cli"
require_relative "../../test/support/process"
require "socket"
require "open3"
require "tempfile"
require "pty"
require "rbconfig"

# `oribi bench`: flags to requests, one-line errors, exit codes, and short
# runs against a keep-alive server on a thread of this process.
class BenchCLITest < Minitest::Test
  include BenchCLIHelper

  def parse(*argv) = Oribi::Bench::CLI.new(StringIO.new, StringIO.new).parse(argv)

  def test_request_from_flags
    body = Tempfile.new("body")
    body.write("a=1")
    body.close
    o = parse("-m", "POST", "-H", "X-A: 1", "-H", "Host: h", "--body", body.path,
              "--no-keepalive", "-T", "3", "-c", "7", "-n", "9", "http://127.0.0.1:8080/p?q=1")
    assert_equal "POST /p?q=1 HTTP/1.1\r\nUser-Agent: oribi-bench\r\nX-A: 1\r\nHost: h\r\n" \
                 "Connection: close\r\nContent-Length: 3\r\n\r\na=1", o[:run][:request]
    assert_equal({ host: "127.0.0.1", port: 8080, threads: 3, connections: 7, requests: 9,
                   keepalive: false, timeout: 10.0, max_connections: 1000 }, o[:run].except(:request))
  ensure
    body&.unlink
  end

  def test_unix_socket_and_ipv6
    assert_equal "/tmp/x.sock", parse("--unix-socket", "/tmp/x.sock", "http://localhost/")[:run][:unix_path]
    r = parse("-d", "500ms", "http://[::1]:9/")[:run]
    assert_equal ["::1", 9, 0.5], r.values_at(:host, :port, :duration)
    assert_includes r[:request], "Host: [::1]:9\r\n"
  end

  def test_open_loop_flags
    r = parse("-r", "6000/m", "--max-connections", "5", "-d", "1m", "http://127.0.0.1:9/")[:run]
    assert_equal [100.0, 5, 60.0], r.values_at(:rate, :max_connections, :duration)
  end

  def test_bad_flags_and_urls_give_one_line_and_exit_2
    [%w[ftp://x], %w[-c 0 http://x/], %w[--bogus http://x/], %w[-d 10parsecs http://x/],
     ["-H", "no colon", "http://x/"], %w[-r 0 http://x/], %w[-r fast http://x/],
     %w[--max-connections 5 http://x/], %w[--warmup 1s -n 5 http://x/], %w[], %w[http://a/ http://b/], %w[--body /nonexistent/f http://x/]].each do |argv|
      rc, out, err = bench(*argv)
      assert_equal 2, rc, argv.inspect
      assert_empty out
      assert_match(/\Aoribi bench: [^\n]+\n\z/, err, argv.inspect)
    end
  end

  def test_ports_out_of_range_are_refused_before_the_run
    # 99999 used to be taken modulo 65536 and connect to port 34463.
    %w[http://127.0.0.1:99999/ http://127.0.0.1:0/ http://127.0.0.1:65536/].each do |url|
      rc, out, err = bench("-n", "1", url)
      assert_equal 2, rc, url
      assert_empty out
      assert_match(/\Aoribi bench: bad port/, err, url)
    end
    Dir.mktmpdir do |dir|
      targets = File.join(dir, "t.txt")
      File.write(targets, "GET http://127.0.0.1:70000/\n")
      rc, _, err = bench("-n", "1", "--targets", targets)
      assert_equal 2, rc
      assert_match(/bad port/, err)
    end
    assert_equal 65_535, parse("http://127.0.0.1:65535/")[:run][:port]
  end

  def test_plot_into_a_missing_directory_fails_before_the_run
    port = free_port
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    rc, out, err = bench("-d", "3s", "-c", "1", "-T", "1", "--plot", "/nonexistent/dir/p.html",
                         "http://127.0.0.1:#{port}/")
    assert_equal 2, rc
    assert_empty out
    assert_match(%r{\Aoribi bench: cannot write /nonexistent/dir/p.html}, err)
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :<, 2, "no 3 s run first"
  end

  def test_help_names_the_plot_file_as_written
    out, = Open3.capture3(RbConfig.ruby, "-Ilib", "exe/oribi", "bench", "--help",
                          chdir: File.expand_path("../..", __dir__))
    line = out.lines.grep(/--plot/).first
    refute_match(/FILE\.html/, line, "--plot FILE writes FILE itself")
  end

  def test_plot_flag_writes_the_page
    Dir.mktmpdir do |dir|
      port = free_port
      out = File.join(dir, "p.html")
      rc, = bench("-d", "300ms", "-c", "1", "-T", "1", "--plot", out, "http://127.0.0.1:#{port}/")
      assert_equal 1, rc
      assert_match(/<div class="chart" id="latency">/, File.read(out))
      assert_equal 0.1, parse("-d", "3s", "--plot", out, "http://x/")[:run][:series_interval]
      assert_equal 2.0, parse("-d", "10m", "--plot", out, "http://x/")[:run][:series_interval]
    end
  end

  def test_targets_file
    Dir.mktmpdir do |dir|
      File.write(File.join(dir, "b.json"), "{}")
      path = File.join(dir, "t.txt")
      File.write(path, "# comment\nGET http://127.0.0.1:9/a\nX-A: 1\n\nPOST http://127.0.0.1:9/b\n@b.json\n\nHEAD http://127.0.0.1:9/c\n")
      reqs = parse("--targets", path, "-H", "X-All: y")[:run][:request]
      assert_equal ["GET /a HTTP/1.1\r\nHost: 127.0.0.1:9\r\nUser-Agent: oribi-bench\r\nX-All: y\r\nX-A: 1\r\n\r\n",
                    "POST /b HTTP/1.1\r\nHost: 127.0.0.1:9\r\nUser-Agent: oribi-bench\r\nX-All: y\r\nContent-Length: 2\r\n\r\n{}",
                    "HEAD /c HTTP/1.1\r\nHost: 127.0.0.1:9\r\nUser-Agent: oribi-bench\r\nX-All: y\r\n\r\n"], reqs
      { "GET http://a:1/\nGET http://b:1/\n" => /share one host/, "X: 1\n" => /t2:1: METHOD URL/,
        "GET ftp://x/\n" => /t2:1: http/, "GET http://a/\nnonsense\n" => /t2:2: bad line/, "# none\n" => /no targets/ }.each do |text, re|
        File.write(File.join(dir, "t2"), text)
        rc, _, err = bench("--targets", File.join(dir, "t2"))
        assert_equal 2, rc, text
        assert_match re, err
      end
    end
  end

  def test_targets_are_sent_in_turn
    server = TCPServer.new("127.0.0.1", 0)
    paths = Queue.new
    acceptor = Thread.new do
      loop do
        Thread.new(server.accept) do |s|
          loop do
            buf = +""
            buf << s.readpartial(4096) until buf.include?("\r\n\r\n")
            paths << buf[/\A\S+ (\S+)/, 1]
            s.write(buf.start_with?("HEAD") ? "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n" : "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
          end
        rescue IOError, SystemCallError
          s.close
        end
      end
    rescue IOError
      nil
    end
    Dir.mktmpdir do |dir|
      path = File.join(dir, "t")
      url = "http://127.0.0.1:#{server.addr[1]}"
      File.write(path, "GET #{url}/a\n\nHEAD #{url}/b\n\nGET #{url}/c\n")
      rc, out, = bench("--targets", path, "-n", "30", "-c", "1", "-T", "1")
      assert_equal 0, rc, out
      assert_match(/^Status Codes .* 200:30$/, out)
      got = Array.new(paths.size) { paths.pop }
      assert_equal %w[/a /b /c] * 10, got
    end
  ensure
    server&.close
    acceptor&.join(2)
  end

  EXE = File.expand_path("../../exe/oribi", __dir__)

  def test_exe_dispatches_bench
    out, st = Open3.capture2e(RbConfig.ruby, EXE, "bench", "--bogus")
    assert_equal 2, st.exitstatus
    assert_equal "oribi bench: invalid option: --bogus\n", out
  end

  def test_ctrl_c_on_a_terminal_ends_the_run_with_a_report
    port = free_port
    PTY.spawn(RbConfig.ruby, EXE, "bench", "-d", "60s", "-c", "1", "-T", "1",
              "http://127.0.0.1:#{port}/") do |r, _w, pid|
      seen = +""
      Timeout.timeout(20) do
        seen << r.readpartial(4096) until seen.include?("errors") # the progress line: running
        Process.kill(:INT, pid)
        loop { seen << r.readpartial(4096) }
      rescue Errno::EIO, EOFError
        nil # the pty closes when the process is gone
      end
      _, st = Process.wait2(pid)
      assert_equal 1, st.exitstatus, seen # every request was refused
      assert_match(/\e\[KRequests +\[total, rate, throughput\]/, seen) # line erased, then the report
      assert_match(/^connect: \d+/, seen)
    end
  end

  def test_progress_line
    assert_equal "2.5s  1200 requests  480/s  3 errors", Oribi::Bench::Progress.line(2.5, 1200, 480.4, 3)
    io = StringIO.new
    t = 0.0
    pr = Oribi::Bench::Progress.new(io, clock: -> { t })
    t = 0.5
    pr.update(100, 2)
    pr.finish
    assert_equal "\r\e[K0.5s  102 requests  204/s  2 errors\r\e[K", io.string
  end

  def test_progress_on_a_terminal_while_running
    port = free_port # refused: counted errors
    err = StringIO.new
    def err.tty? = true
    rc = Timeout.timeout(10) do
      Oribi::Bench::CLI.run(["-d", "700ms", "-c", "1", "-T", "1", "http://127.0.0.1:#{port}/"],
                            out: StringIO.new, err: err)
    end
    assert_equal 1, rc
    assert_match(/\r\e\[K0\.[0-9]s  \d+ requests  \d+\/s  \d+ errors/, err.string)
    assert err.string.end_with?("\r\e[K"), "the line is erased before the report"
  end

  def test_unreachable_target_exits_1
    port = free_port # closed: refused
    rc, out, = bench("-n", "5", "-c", "1", "-T", "1", "http://127.0.0.1:#{port}/")
    assert_equal 1, rc
    assert_match(/^Status Codes .*0:5$/, out)
    assert_match(/^connect: 5 \(ECONNREFUSED 5\)$/, out)
    rc, _, err = bench("-n", "1", "http://no-such-host.invalid/")
    assert_equal 1, rc
    assert_match(/\Aoribi bench: cannot resolve/, err)
  end

  def test_closed_loop_run_text_and_json
    server = TCPServer.new("127.0.0.1", 0)
    acceptor = Thread.new do
      loop do
        Thread.new(server.accept) do |s|
          loop do
            buf = +""
            buf << s.readpartial(4096) until buf.include?("\r\n\r\n")
            s.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
          end
        rescue IOError, SystemCallError
          s.close
        end
      end
    rescue IOError
      nil
    end
    url = "http://127.0.0.1:#{server.addr[1]}/"
    rc, out, err = bench("-n", "200", "-c", "4", "-T", "2", url)
    assert_equal 0, rc
    assert_empty err, "no progress line when stderr is not a terminal"
    assert_match(/^Requests +\[total, rate, throughput\] +200, /, out)
    assert_match(/^Success +\[ratio\] +100.00%$/, out)
    assert_match(/^Status Codes +\[code:count\] +200:200$/, out)
    rc, out, = bench("-n", "50", "-c", "2", "--json", url)
    assert_equal 0, rc
    j = JSON.parse(out)
    assert_equal 50, j["requests"]
    assert_equal({ "200" => 50 }, j["status_codes"])
    assert_equal 24, j["percentiles"].size
    assert_operator j["latencies"]["max"], :>=, j["latencies"]["min"]
  ensure
    server&.close
    acceptor&.join(2)
  end
end
