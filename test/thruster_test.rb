# frozen_string_literal: true

require "test_helper"
require "framework_process"
require "digest"
require "json"
require "ipaddr"
require_relative "support/sse_timing"

# A Rails app behind Thruster as Rails 8 runs it (`thrust bin/rails server`,
# the `thruster` gem's Go binary) with Oribi selected by RACKUP_HANDLER, as
# in examples/docker/Dockerfile: it serves, streams, takes uploads, lets
# Thruster serve send_file's files (X-Sendfile), and stops on Thruster's
# TERM without losing a request.
class ThrusterTest < Minitest::Test
  def setup
    FrameworkProcess.require_gem(self, "railties")
    FrameworkProcess.require_gem(self, "thruster")
    @root = Dir.mktmpdir("oribi-thruster")
    FileUtils.cp_r(File.join(APPS, "rails", "."), @root)
    FileUtils.mkdir_p(File.join(@root, "log"))
  end

  def teardown
    @srv&.stop
    FileUtils.rm_rf(@root) if @root
  end

  def thrust = Gem::Specification.find_by_name("thruster").bin_file("thrust")

  # Thruster on a free port, the Rails app on another (TARGET_PORT, which
  # Thruster passes on as PORT); config/oribi.rb holds config, args are
  # typed after `bin/rails server`.
  def start(config, env = {}, args: [])
    File.write(File.join(@root, "config/oribi.rb"), config)
    env = { "RACKUP_HANDLER" => "oribi", "RAILS_ENV" => "production", "WEB_CONCURRENCY" => "2",
            "TARGET_PORT" => free_port.to_s, "STORAGE_PATH" => File.join(@root, "tmp/thruster"),
            "LOG_REQUESTS" => "false" }.merge(env)
    @srv = FrameworkProcess.new(chdir: @root, env: env) do |port|
      env["HTTP_PORT"] = port.to_s # read when the process is spawned, after this block
      [RbConfig.ruby, thrust, RbConfig.ruby, "bin/rails", "server", *args]
    end
    # Thruster listens at once and answers 502 until the app is up.
    assert wait_until(timeout: 60, interval: 0.1) { get("/hello")&.status == 200 }, "no 200 through Thruster\n#{@srv.log}"
    assert_match(/Oribi .* 2 workers \(\$WEB_CONCURRENCY\), env production/, @srv.log)
  end

  def get(path, headers = {})
    s = @srv.tcp
    HTTPClient.request(s, path, headers: { "Connection" => "close" }.merge(headers))
  rescue SystemCallError, EOFError
    nil
  ensure
    s&.close
  end

  # The live processes whose parent is pid (from /proc).
  def children_of(pid)
    Dir.children("/proc").grep(/\A\d+\z/).map(&:to_i).select do |child|
      fields = File.read("/proc/#{child}/stat").split(") ", 2)[1].split
      fields[1].to_i == pid && !fields[0].start_with?("Z")
    rescue SystemCallError
      false
    end
  end

  def access_log = File.read(File.join(@root, "log/access.log")).lines.map { |l| JSON.parse(l) }

  def test_serves_streams_uploads_and_leaves_files_to_thruster
    start(<<~RUBY, { "X_SENDFILE_HEADER" => "X-Sendfile" })
      access_log "log/access.log"
      access_log_format "json"
    RUBY
    assert_match(/\ARails [\d.]+ on Oribi: multiprocess=true\z/, get("/hello").body)

    # ActionController::Live through Thruster: each event as it is written.
    s = @srv.tcp
    s.write("GET /live?n=3 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    events, raw = SSETiming.read(s)
    assert_match(%r{\AHTTP/1.1 200 }, raw)
    SSETiming.assert_streamed(self, events, 3, "ActionController::Live behind Thruster")
    s.close

    # A 5 MB multipart upload arrives whole.
    data = Random.new(31).bytes(5 * 1024 * 1024)
    boundary = "oribi#{rand(1 << 32)}"
    body = "--#{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"blob.bin\"\r\n" \
           "Content-Type: application/octet-stream\r\n\r\n#{data}\r\n--#{boundary}--\r\n".b
    res = HTTPClient.request(@srv.tcp, "/upload", method: "POST", body: body,
                                                  headers: { "Content-Type" => "multipart/form-data; boundary=#{boundary}" })
    assert_equal [200, "blob.bin #{data.bytesize} #{Digest::SHA256.hexdigest(data)}"], [res.status, res.body]

    # send_file: Oribi answers with X-Sendfile and no body, Thruster sends the file.
    file = Random.new(32).bytes(3 * 1024 * 1024)
    File.binwrite(File.join(@root, "tmp/big.bin"), file)
    res = get("/download?name=big.bin")
    assert_equal 200, res.status
    assert_equal file.bytesize, res.body.bytesize
    assert res.body == file, "the file differs"
    assert_nil res["x-sendfile"]
    logged = nil
    assert wait_until { (logged = access_log.find { |r| r["uri"].start_with?("/download") }) }
    assert_equal "-", logged["size"], "Oribi sent the body itself: #{logged.inspect}"
  end

  # The addresses the server's processes listen on at port, from the
  # kernel's socket tables (IPv4 and IPv6).
  def listening_addresses(port)
    suffix = format(":%04X", port)
    mine = @srv.instance_variable_get(:@group).members.keys.flat_map { |pid| socket_names(pid) }
    %w[/proc/net/tcp /proc/net/tcp6].flat_map do |table|
      File.foreach(table).filter_map do |line|
        local, state, inode = line.split.values_at(1, 3, 9)
        next unless local.end_with?(suffix) && state == "0A" && mine.include?("socket:[#{inode}]")

        hex = local.split(":").first
        words = [hex].pack("H*").unpack("V*") # the kernel prints each 32-bit word in host order
        IPAddr.new_ntoh(words.pack("N*")).to_s
      end
    end.uniq.sort
  end

  def refused?(host, port)
    TCPSocket.new(host, port).close
    false
  rescue Errno::ECONNREFUSED
    true
  end

  # Thruster sets PORT for the server it starts, and Rails hands it to the
  # handler as if the user had typed -p, with its default host (0.0.0.0 in
  # production) beside it. The config file's bind, here the one
  # examples/docker/oribi.rb has, is the only listener all the same: the
  # port answers on 127.0.0.1 alone, not on another loopback address.
  def test_the_config_files_bind_is_kept_behind_thruster
    target = free_port
    bind = File.read(File.join(ROOT, "examples/docker/oribi.rb"))[/^bind .*$/]
    start("#{bind}\n", { "TARGET_PORT" => target.to_s })
    assert_equal ["127.0.0.1"], listening_addresses(target), @srv.log
    assert_match(%r{listening on tcp://127\.0\.0\.1:#{target}$}, @srv.log)
    assert refused?("127.0.0.2", target), "127.0.0.2:#{target} accepts: the server listens beyond the file's bind"
    refute_match(/in place of/, @srv.log)
  end

  # What the user types (-b) replaces the file's bind, and the boot log
  # says so. The file names 127.0.0.2, which Thruster (proxying to
  # localhost) could not reach: serving through it shows the typed one won.
  def test_a_bind_typed_on_the_command_line_replaces_the_files_and_the_log_says_so
    target = free_port
    start(%(bind "tcp://127.0.0.2:#{target}"\n), { "TARGET_PORT" => target.to_s }, args: ["-b", "127.0.0.1"])
    assert_equal ["127.0.0.1"], listening_addresses(target), @srv.log
    assert refused?("127.0.0.2", target), "the file's bind is not replaced"
    assert_includes @srv.log, "listening on tcp://127.0.0.1:#{target} in place of config/oribi.rb's bind " \
                              "tcp://127.0.0.2:#{target}: -b 127.0.0.1 was typed on the command line"
  end

  # Requests napping 1 s, in flight, and a client every 10 ms until
  # stop.call(term time) says so; TERM to Thruster. Returns the statuses
  # of the ones in flight, of the probes (:failed: no response) and of the
  # probes sent after TERM.
  def term_under_probes(stop)
    napping = 4.times.map do
      s = @srv.tcp
      s.write("GET /nap?s=1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
      s
    end
    seen = []
    after = []
    term = []
    prober = Thread.new do
      until term.any? && stop.call(term.first)
        at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        seen << (get("/hello")&.status || :failed)
        after << seen.last if term.any? && at >= term.first
        sleep [0.01 - (Process.clock_gettime(Process::CLOCK_MONOTONIC) - at), 0].max # the client's pace
      end
    end
    assert wait_until { seen.count(200) >= 3 }
    term << Process.clock_gettime(Process::CLOCK_MONOTONIC)
    Process.kill(:TERM, @srv.pid)
    in_flight = napping.map { |s| HTTPClient.read_response(s, timeout: 20)&.status }
    prober.join
    [in_flight, seen, after]
  end

  # Thruster relays TERM to the server and serves until it exits. With
  # shutdown_delay, the requests in flight and those that keep coming for
  # the delay are all answered; then Oribi drains, and both exit 0.
  def test_term_from_thruster_loses_no_request
    start(<<~RUBY)
      shutdown_delay 2
      control "unix://#{@root}/tmp/control.sock"
    RUBY
    in_flight, seen, after = term_under_probes(->(term) { Process.clock_gettime(Process::CLOCK_MONOTONIC) >= term + 1.8 })
    assert_equal [200] * 4, in_flight, "requests in flight at TERM"
    assert_operator seen.size, :>=, 20, "too few probes: #{seen.tally}"
    assert_equal({ 200 => seen.size }, seen.tally, "probes across TERM")
    status = @srv.wait_exit(30)
    assert status&.success?, "thrust exit #{status.inspect}\n#{@srv.log}"
    assert_match(/TERM: readiness 503, serving 2(\.0)? s more/, @srv.log)
    puts "\nbehind Thruster, shutdown_delay 2: #{seen.size} probes every 10 ms across TERM, " \
         "#{seen.tally.inspect}, of which sent after TERM #{after.tally.inspect}; #{in_flight.tally.inspect} in flight"
  end

  # Without the delay the requests in flight are answered too, but Thruster
  # answers 502 to the ones that come once Oribi closed its listeners,
  # until it exits (the requests in flight hold it for their second).
  def test_without_a_delay_thruster_answers_502_after_term
    start("")
    in_flight, seen, after = term_under_probes(->(_) { !Process.wait(@srv.pid, Process::WNOHANG).nil? })
    assert_equal [200] * 4, in_flight, "requests in flight at TERM"
    refute_equal 0, seen.count(502), "no 502 without shutdown_delay: #{seen.tally}"
    puts "\nbehind Thruster, no shutdown_delay: #{seen.tally.inspect}, of which sent after TERM #{after.tally.inspect} " \
         "(502: Oribi's listeners closed)"
  end

  # Rails 8's production command with the app's own config/puma.rb,
  # untouched and with no config/oribi.rb: it boots with the file's
  # workers, threads, pidfile and hooks (it was skipped without a word:
  # a worker per CPU, 3 threads, no pidfile, no hook); a request longer
  # than its worker_timeout answers 200 (Puma's check-in timeout, not a
  # request deadline: 2 s here for the 60 of a real file, the request 4
  # s for 65); USR1, the deploy's phased restart, replaces the workers.
  PUMA_RB = <<~RUBY
    threads_count = ENV.fetch("RAILS_MAX_THREADS", 5)
    threads threads_count, threads_count
    port ENV.fetch("PORT", 3000)
    plugin :tmp_restart
    pidfile ENV["PIDFILE"] if ENV["PIDFILE"]
    workers ENV.fetch("PUMA_WORKERS", 2)
    worker_timeout 2
    on_worker_boot { |index| File.write("tmp/booted-\#{index}", Process.pid.to_s) }
  RUBY

  def test_rails_8s_command_runs_the_apps_own_puma_config
    File.write(File.join(@root, "config/puma.rb"), PUMA_RB)
    pidfile = File.join(@root, "tmp/server-puma.pid")
    FileUtils.mkdir_p(File.join(@root, "tmp"))
    env = { "RACKUP_HANDLER" => "oribi", "RAILS_ENV" => "production", "WEB_CONCURRENCY" => nil, "ORIBI_THREADS" => nil,
            "RAILS_MAX_THREADS" => nil, "PIDFILE" => pidfile, "TARGET_PORT" => free_port.to_s,
            "STORAGE_PATH" => File.join(@root, "tmp/thruster"), "LOG_REQUESTS" => "false" }
    @srv = FrameworkProcess.new(chdir: @root, env: env) do |port|
      env["HTTP_PORT"] = port.to_s
      [RbConfig.ruby, thrust, RbConfig.ruby, "bin/rails", "server"]
    end
    assert wait_until(timeout: 60, interval: 0.1) { get("/hello")&.status == 200 }, "no 200 through Thruster\n#{@srv.log}"
    assert_match(/Oribi .* 2 workers, env production, app preloaded, 5 threads per worker, config config\/puma\.rb \(Puma's\)/,
                 @srv.log)
    assert wait_until { File.exist?(pidfile) }, "no pidfile\n#{@srv.log}"
    master = File.read(pidfile).to_i
    workers = -> { children_of(master) }
    booted = wait_until { (files = Dir[File.join(@root, "tmp/booted-*")]).size == 2 && files }
    assert booted, "on_worker_boot did not run in both workers\n#{@srv.log}"
    assert_equal workers.call.sort, booted.map { |f| File.read(f).to_i }.sort

    res = get("/nap?s=4")
    assert_equal 200, res&.status, @srv.log
    refute_match(/killing it/, @srv.log)

    old = workers.call
    Process.kill(:USR1, master)
    assert wait_until(timeout: 60) { (now = workers.call).size == 2 && !now.intersect?(old) }, "USR1 did not replace the workers\n#{@srv.log}"
    assert_match(/USR1 \(Puma's\): rolling restart of 2 worker\(s\)/, @srv.log)
    assert_equal 200, get("/hello")&.status
  end
end
