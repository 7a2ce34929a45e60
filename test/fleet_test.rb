# frozen_string_literal: true

require "test_helper"
require "json"
require "securerandom"
require "set"
require "oribi/bench/results"
require_relative "haproxy_proxy"
require_relative "nginx_proxy"
require_relative "support/fleet"

# A fleet behind a load balancer (docs/DEPLOYMENT.md, "More than one
# host"), with real parts: three hosts, each its own Oribi in a network
# namespace of its own, behind haproxy checking their /readyz, with the
# host and haproxy configs that page gives (read from it: the page shows
# what ran). nginx, with the page's config, serves the same hosts beside
# haproxy. Open-loop load through both the whole time, every request
# counted by when it was due:
#
# - a rolling hot restart (USR2) of the three, one after another: none fails;
# - a rolling stop and start (TERM, wait for the exit, start again, as a
#   container orchestrator does): none fails, and haproxy takes each host
#   out before its shutdown_delay ends;
# - one host's master killed (SIGKILL): haproxy takes it out within inter
#   × fall, and fails at most what it sent there meanwhile;
# - each host's /metrics scraped all along: host3, one worker on a slower
#   app (for a while), shows it in its queue time and busy workers.
#
# Needs root (ip netns); CI runs as root and sets ORIBI_FLEET_REQUIRED=1,
# so there it fails rather than skips.
class FleetTest < Minitest::Test
  DOC = File.read(File.join(ROOT, "docs/DEPLOYMENT.md"))
  EXE = File.join(ROOT, "exe/oribi")
  APP = File.join(APPS, "fleet.ru")

  # Requests a second through haproxy and through nginx
  RATE = 45
  NGINX_RATE = 15
  NGINX_PORT = 8000 # haproxy has the page's port 80 on the balancer
  # The app's mean time: 10 ms. host3 runs one worker where the others
  # run two, and during the steady phase its app is 3 times as slow (a
  # slow database, say): the 20 requests a second each host gets keep its
  # worker 60% busy, theirs 10%. Only then, and 6 s at most: with another
  # host out it would get half the load, and on a machine short of CPU
  # even a third can be more than it takes at that speed.
  WORKERS = { "host1" => 2, "host2" => 2, "host3" => 1 }.freeze
  APP_DELAY = 0.01
  SLOW_DELAY = 0.03
  LOADED = "host3"
  KILLED = "host1"
  SCRAPE_EVERY = 0.1

  # The fenced block under the line "`FILE`:" in the page's section.
  def self.doc_block(file)
    section = DOC[/^## More than one host\n(.*?)(?=^## )/m, 1] or raise "docs/DEPLOYMENT.md: no \"More than one host\""
    section[/^`#{Regexp.escape(file)}`:\n\n```\w*\n(.*?)^```$/m, 1] or raise "docs/DEPLOYMENT.md: no block for #{file}"
  end

  ORIBI_RB = doc_block("config/oribi.rb")
  HAPROXY_CFG = doc_block("/etc/haproxy/haproxy.cfg")
  NGINX_CONF = doc_block("/etc/nginx/conf.d/app.conf")

  def require_fleet
    reason = Fleet.unavailable || ("no haproxy" unless HaproxyProxy.available?) || ("no nginx" unless NginxProxy.available?)
    return unless reason

    flunk "#{reason}, and ORIBI_FLEET_REQUIRED=1 (CI)" if ENV["ORIBI_FLEET_REQUIRED"] == "1"
    skip reason
  end

  # What the configs say: the hosts (haproxy's server lines), the
  # balancer's address (the hosts trust its X-Request-Start), the checks.
  def layout
    servers = HAPROXY_CFG.scan(/^\s*server (\S+) ([\d.]+):(\d+)/)
    {
      backend: HAPROXY_CFG[/^backend (\S+)/, 1],
      hosts: servers.to_h { |name, address, _| [name, address] },
      port: servers.map(&:last).uniq.then { |p| p.size == 1 ? Integer(p.first) : flunk("one port for all hosts") },
      control_port: Integer(HAPROXY_CFG[/check port (\d+)/, 1]),
      balancer: ORIBI_RB[/^trusted_proxies \["([\d.]+)"\]/, 1],
      inter: Float(HAPROXY_CFG[/ inter (\d+)ms/, 1]) / 1000,
      fall: Integer(HAPROXY_CFG[/ fall (\d+)/, 1]),
      shutdown_delay: Float(ORIBI_RB[/^shutdown_delay ([\d.]+)/, 1]),
    }
  end

  def test_the_configs_on_the_page_hold_together
    l = layout
    assert_equal %w[host1 host2 host3], l[:hosts].keys
    assert l[:balancer], "config/oribi.rb: no trusted_proxies for the balancer"
    assert l[:hosts].values.all? { |a| a.start_with?(l[:balancer][/\A\d+\.\d+\.\d+\./]) }, "hosts beside the balancer"
    # the rule the page gives: the delay outlasts the time haproxy takes to see the 503
    assert_operator l[:shutdown_delay], :>, l[:inter] * l[:fall]
    assert_equal l[:hosts].values.map { |a| "#{a}:#{l[:port]}" }, NGINX_CONF.scan(/^\s*server ([\d.]+:\d+)/).flatten,
                 "nginx's upstream: the same hosts as haproxy's"
  end

  def test_a_fleet_deploys_host_by_host_without_losing_a_request
    require_fleet
    @l = layout
    @token = SecureRandom.hex(16)
    @fleet = Fleet.new(balancer: @l[:balancer], prefix: 24, hosts: @l[:hosts])
    start_fleet
    loads = { haproxy: Load.new(@fleet, "haproxy", "http://127.0.0.1/", RATE),
              nginx: Load.new(@fleet, "nginx", "http://127.0.0.1:#{NGINX_PORT}/", NGINX_RATE) }
    assert wait_until(timeout: 30) { loads.values.all?(&:started?) }, "no load: #{loads.values.map(&:log)}"
    phases = run_phases
    results = loads.transform_values { |load| load.finish(phases.last[:to]) }

    tallies = results.transform_values { |r| phases.to_h { |p| [p[:name], r.tally(p[:from], p[:to])] } }
    metrics = metrics(phases.find { |p| p[:name] == :steady })
    report(tallies, phases, metrics)
    tallies.each do |via, by_phase|
      by_phase.each do |phase, t|
        next if phase == :kill

        assert_operator t[:requests], :>=, 10, "#{via} #{phase}: too few requests to tell" unless phase == :start
        assert_equal 0, t[:failed], "#{via} #{phase}: #{t}\n#{haproxy_log}"
      end
    end
    check_kill(tallies[:haproxy][:kill], phases.last)
    check_metrics(metrics)
  ensure
    @scraper&.stop(:TERM, timeout: 5)
    @fleet&.close
  end

  private

  def start_fleet
    dir = @fleet.dir
    File.write(@conf = File.join(dir, "oribi.rb"), ORIBI_RB)
    @l[:hosts].each_key { |name| start_host(name) }
    @admin = File.join(dir, "haproxy.sock")
    haproxy = HAPROXY_CFG.sub("/run/haproxy/admin.sock", @admin)
    refute_equal HAPROXY_CFG, haproxy, "the page's haproxy config has no stats socket"
    File.write(cfg = File.join(dir, "haproxy.cfg"), haproxy)
    @haproxy_log = File.join(dir, "haproxy.log")
    @fleet.spawn(@fleet.lb, [HaproxyProxy::HAPROXY, "-db", "-f", cfg], log: @haproxy_log, env: { "ORIBI_CONTROL_TOKEN" => @token })
    start_nginx(dir)
    assert wait_until(timeout: 20) { (s = servers) && s.values.all? { |v| v["status"] == "UP" && v["check_status"] == "L7OK" } },
           "haproxy does not see the hosts up: #{servers}\n#{haproxy_log}"
    @scraper = @fleet.spawn(@fleet.lb, [RbConfig.ruby, File.join(__dir__, "support/fleet_scraper.rb"), SCRAPE_EVERY.to_s,
                                        *@l[:hosts].map { |n, a| "#{n}=#{a}:#{@l[:control_port]}" }],
                            log: nil, env: { "ORIBI_CONTROL_TOKEN" => @token },
                            out: @scrapes = File.join(dir, "scrapes"), err: File.join(dir, "scraper.err"))
  end

  def start_host(name)
    @fleet.start_host(name, [RbConfig.ruby, EXE, "-C", @conf, "-w", WORKERS[name].to_s, APP],
                      env: { "PRIVATE_IP" => @l[:hosts][name], "ORIBI_CONTROL_TOKEN" => @token,
                             "FLEET_APP_DELAY" => APP_DELAY.to_s, "FLEET_SLOW_FILE" => slow_file(name) })
  end

  def slow_file(name) = File.join(@fleet.dir, "#{name}.slow")

  # The page's nginx server block in an nginx.conf of the test's, on
  # another port than haproxy's.
  def start_nginx(dir)
    server = NGINX_CONF.sub(/^(\s*)listen 80;$/, "\\1listen #{NGINX_PORT};")
    refute_equal NGINX_CONF, server, "the page's nginx config does not listen on 80"
    temp = %w[client_body proxy fastcgi uwsgi scgi].map { |t| "#{t}_temp_path #{dir}/#{t};" }.join("\n")
    File.write(conf = File.join(dir, "nginx.conf"), <<~CONF)
      user root;
      worker_processes 1;
      error_log #{dir}/nginx.err info;
      pid #{dir}/nginx.pid;
      events { worker_connections 1024; }
      http {
        access_log off;
        #{temp}
        #{server}
      }
    CONF
    @fleet.spawn(@fleet.lb, [NginxProxy::NGINX, "-p", dir, "-c", conf, "-g", "daemon off;"], log: File.join(dir, "nginx.log"))
    # nginx writes its pid file once its listeners are bound
    assert wait_until(timeout: 10) { File.exist?(File.join(dir, "nginx.pid")) }, "nginx did not start"
  end

  # The phases, one after the other, each from where the last ended:
  # [{ name:, from:, to: (unix times), what it measured }]
  def run_phases
    downs = servers.transform_values { |v| Integer(v["chkdown"]) }
    phases = []
    phase = lambda do |name, &blk|
      from = phases.last ? phases.last[:to] : 0 # from the loads' first request
      measured = blk.call
      phases << { name: name, from: from, to: Time.now.to_f, **measured }
    end
    phase.call(:start) { {} }
    phase.call(:steady) do
      File.write(slow_file(LOADED), SLOW_DELAY.to_s)
      # 50 scrapes of each host (5 s), or as many as 6 s allow
      from = Time.now.to_f
      wait_until(timeout: 6) { scrapes(from).values.all? { |s| s.size >= 50 } }
      File.delete(slow_file(LOADED))
      assert scrapes(from).values.all? { |s| s.size >= 20 }, "too few scrapes to tell the hosts apart: #{scrape_errors}"
      {}
    end
    phase.call(:hot_restart) do
      @l[:hosts].each_key { |name| hot_restart(name) }
      {}
    end
    phase.call(:stop_start) { { out_after: @l[:hosts].keys.to_h { |name| [name, stop_and_start(name)] } } }
    phase.call(:kill) { kill(KILLED) }
    # haproxy took each host out for its stop, and KILLED for its death
    # too: never while it served
    downs.each_key { |name| downs[name] += name == KILLED ? 2 : 1 }
    assert_equal downs, servers.transform_values { |v| Integer(v["chkdown"]) }, "times haproxy took each host out\n#{haproxy_log}"
    phases
  end

  def status(name) = servers&.dig(name, "status").to_s

  # What haproxy said of the servers going down and up (-db: to its stderr)
  def haproxy_log = File.read(@haproxy_log).scrub.delete("\0").lines.grep(/Server /).join

  def hot_restart(name)
    before = servers.fetch(name)
    Process.kill(:USR2, @fleet.hosts[name].group.pid)
    assert wait_until(timeout: 30) { @fleet.host_log(name).include?("USR2 done: the previous workers are gone") },
           "#{name}: no hot restart\n#{@fleet.host_log(name)}"
    after = servers.fetch(name)
    assert_equal "UP", after["status"], "#{name} after USR2"
    assert_equal before["chkdown"], after["chkdown"], "haproxy took #{name} out during its hot restart"
  end

  # TERM, then haproxy takes the host out (before the delay ends: → how
  # long it took), the server exits, and starts again.
  def stop_and_start(name)
    group = @fleet.hosts[name].group
    term = now
    Process.kill(:TERM, group.pid)
    trace = [] # what haproxy said of the host's checks as they changed
    assert wait_until(timeout: 5) {
      row = servers&.fetch(name) || {}
      seen = row.values_at("status", "check_status", "check_code", "check_duration", "last_chk")
      trace << [(now - term).round(3), *seen] unless trace.last&.drop(1) == seen
      row["status"].to_s.start_with?("DOWN")
    }, "haproxy kept #{name}: #{servers}"
    out_after = now - term
    assert_operator out_after, :<, @l[:shutdown_delay],
                    "haproxy took #{name} out #{out_after.round(2)} s after TERM, after its shutdown_delay\n" \
                    "#{trace.map(&:inspect).join("\n")}\n#{@fleet.host_log(name)}\n#{haproxy_log}"
    exit_status = group.reap(timeout: 20)
    assert exit_status&.success?, "#{name} after TERM: #{exit_status.inspect}\n#{@fleet.host_log(name)}"
    start_host(name)
    assert wait_until(timeout: 20) { status(name) == "UP" },
           "#{name} is not back: #{servers[name]}\n#{@fleet.host_log(name)}"
    out_after
  end

  # SIGKILL to the master; → when haproxy took the host out, and what it
  # sent there until then.
  def kill(name)
    host = @fleet.hosts[name]
    before = servers.fetch(name)
    workers = host.group.worker_pids
    refute_empty workers
    killed = now
    Process.kill(:KILL, host.group.pid)
    assert wait_until(timeout: 5) { status(name).start_with?("DOWN") }, "haproxy kept #{name}: #{servers}"
    out_after = now - killed
    at_out = servers.fetch(name)
    # by its check: the control endpoint went with the master
    assert_equal "L4CON", at_out["check_status"], "#{name} taken out by: #{at_out}"
    # the workers see the master gone, finish what they have and exit
    assert wait_until(timeout: 15) { workers.none? { |pid| process_alive?(pid) } },
           "#{name}'s workers outlived their master\n#{@fleet.host_log(name)}"
    after = servers.fetch(name)
    { out_after: out_after, sent: Integer(at_out["stot"]) - Integer(before["stot"]),
      retried: Integer(after["wretr"]) - Integer(before["wretr"]),
      redispatched: Integer(after["wredis"]) - Integer(before["wredis"]) }
  end

  # Out within inter × fall of the kill (the first failed check comes
  # within inter), give or take a second of a busy machine's delays (a
  # late check was seen 0.8 s late on the shared 2-core box, load 7).
  def check_kill(tally, phase)
    bound = @l[:inter] * @l[:fall] + 1
    assert_operator phase[:out_after], :<=, bound, "haproxy took #{KILLED} out #{phase[:out_after].round(3)} s after SIGKILL"
    assert_operator tally[:failed], :<=, phase[:sent],
                    "more failures than requests haproxy sent #{KILLED} before taking it out: #{tally} #{phase}"
  end

  # What each host's /metrics said during phase: { queue: mean queue
  # time, busy: mean share of its workers busy in the app }, by host.
  def metrics(phase)
    s = scrapes(phase[:from], phase[:to])
    queue = s.transform_values do |list|
      first, last = list.first[:metrics], list.last[:metrics]
      count = last["oribi_request_queue_seconds_count"] - first["oribi_request_queue_seconds_count"]
      (last["oribi_request_queue_seconds_sum"] - first["oribi_request_queue_seconds_sum"]) / count
    end
    busy = s.transform_values do |list|
      list.sum { |x| x[:metrics].select { |k, _| k.start_with?("oribi_worker_busy{") }.values.sum / x[:metrics]["oribi_workers"] } /
        list.size
    end
    { queue: queue, busy: busy }
  end

  # host3, the loaded one, waits longer and has its workers busier than
  # each of the others, by far.
  def check_metrics(metrics)
    (@l[:hosts].keys - [LOADED]).each do |other|
      assert_operator metrics[:queue][LOADED], :>, 2 * metrics[:queue][other], "mean queue time: #{metrics}"
      assert_operator metrics[:busy][LOADED], :>, 2 * metrics[:busy][other], "busy workers: #{metrics}"
    end
  end

  # haproxy's view of the servers (its runtime API, on a unix socket: the
  # test reaches it from outside the namespace): { name => show stat row }
  def servers
    out = UNIXSocket.open(@admin) do |s|
      s.write("show stat\n")
      s.read
    end
    head, *rows = out.lines
    keys = head.delete_prefix("# ").chomp.split(",")
    rows.map { |r| keys.zip(r.chomp.split(",", -1)).to_h }
        .select { |r| r["pxname"] == @l[:backend] && @l[:hosts].key?(r["svname"]) }
        .to_h { |r| [r["svname"], r] }
  rescue SystemCallError
    nil
  end

  # { host => [scrape, ...] } of the scrapes that answered between from and to
  def scrapes(from, to = Float::INFINITY)
    lines = File.exist?(@scrapes) ? File.readlines(@scrapes) : []
    by_host = @l[:hosts].keys.to_h { |h| [h, []] }
    lines.each do |line|
      next unless line.end_with?("\n")

      x = JSON.parse(line, symbolize_names: true)
      next unless x[:metrics] && x[:at].between?(from, to)

      x[:metrics] = x[:metrics].transform_keys(&:to_s)
      by_host[x[:host]] << x
    end
    by_host
  end

  def scrape_errors
    File.exist?(@scrapes) ? File.readlines(@scrapes).last(6).join : "no scrapes"
  end

  def report(tallies, phases, metrics)
    kill = phases.last
    lines = tallies.map do |via, t|
      counts = t.map { |name, x| "#{name} #{x[:requests]}/#{x[:failed]}#{" #{x[:how]}" if x[:failed].positive?}" }.join(", ")
      "  through #{via}: requests/failed by phase: #{counts}"
    end
    stop = phases.find { |p| p[:name] == :stop_start }[:out_after].transform_values { |s| (s * 1000).round }
    puts "\nfleet:\n#{lines.join("\n")}\n" \
         "  stop and start: haproxy took each host out #{stop} ms after TERM\n" \
         "  SIGKILL of #{KILLED}'s master: out after #{(kill[:out_after] * 1000).round} ms, haproxy had sent it " \
         "#{kill[:sent]} requests meanwhile, retried #{kill[:retried]}, redispatched #{kill[:redispatched]}\n" \
         "  steady: #{metrics.map { |k, v| "#{k} #{v.transform_values { |x| x.round(4) }}" }.join(', ')}"
  end

  # oribi bench in the balancer's namespace: an open loop at rate, one
  # thread (so request k is due k / rate seconds after the start), every
  # request written to a results file with when it was due.
  class Load
    def initialize(fleet, name, url, rate)
      @rate = rate
      @file = File.join(fleet.dir, "#{name}.results")
      @log = File.join(fleet.dir, "#{name}.log")
      @spawned = Time.now.to_f # the run starts after this
      @group = fleet.spawn(fleet.lb, [RbConfig.ruby, EXE, "bench", "-T", "1", "--rate", rate.to_s, "-d", "5m",
                                      "--timeout", "5s", "--output", @file, url], log: @log)
    end

    def log = File.exist?(@log) ? File.read(@log) : ""

    def started? = records.size >= 10

    # Stops the run once every request due before until_time (a unix time)
    # has its record (a response, an error, or a timeout at 5 s): requests
    # due up to then are those with an index up to what the time since the
    # spawn allows, at the most. → a Result.
    def finish(until_time)
      last = ((until_time - @spawned) * @rate).ceil
      wait_until(timeout: 7) do
        seen = records.to_set { |r| index(r[0]) }
        (0..last).all? { |k| seen.include?(k) }
      end
      @group.stop(:INT, timeout: 15)
      summary = Oribi::Bench::Results.open(@file).summary or raise "no summary in #{@file}:\n#{log}"
      Result.new(records, summary[:start_unix_ns], interval)
    end

    private

    def interval = (1e9 / @rate).floor

    def index(sent_ns) = (sent_ns.to_f / interval).round

    def records
      return [] unless File.exist?(@file)

      data = File.binread(@file)
      from = data.index("\n", Oribi::Bench::Results::MAGIC.bytesize) or return []
      size = Oribi::Loadgen::Results::RECORD_SIZE
      n = (data.bytesize - from - 1) / size
      data.byteslice(from + 1, n * size).unpack("Q<4S<CCS<CC" * n).each_slice(10).take_while { |r| r[9] != 255 }
    end
  end

  # A record's error field: 1 + the kind (oribi-bench/docs/BENCH.md)
  LOAD_ERRORS = [nil, "connect", "read", "write", "timeout", "parse", "tls"].freeze

  # A run's records: what happened to the requests due in a time window.
  Result = Struct.new(:records, :start_ns, :interval) do
    # { requests: due in [from, to) once the run had started, failed:
    # errors, statuses outside 200-399, sent again by the client, or never
    # answered; how: the failures by kind }
    def tally(from, to)
      first = [((from * 1e9 - start_ns) / interval).ceil, 0].max
      last = ((to * 1e9 - start_ns) / interval).ceil - 1
      got = records.select { |r| (r[0].to_f / interval).round.between?(first, last) }
      how = got.filter_map { |r| failure(r) }.tally
      due = [last - first + 1, 0].max
      how["unanswered"] = due - got.size if due > got.size
      { requests: due, failed: how.values.sum, how: how }
    end

    private

    def failure(r)
      return LOAD_ERRORS[r[5]] unless r[5].zero?
      return r[4] unless r[4].between?(200, 399)

      "sent again" if r[8] & 1 == 1
    end
  end
end
