# frozen_string_literal: true

require "test_helper"
require "json"
require "yaml"

# examples/docker/Dockerfile, its config/oribi.rb (examples/docker/oribi.rb)
# and examples/kubernetes/deployment.yaml: parsed and held to each other
# and to docs/DEPLOYMENT.md, and the probes run, as written, against a real
# server started with that config. (Images cannot be built here: there is
# no Docker engine.)
class ContainerExamplesTest < Minitest::Test
  EXAMPLES = File.join(ROOT, "examples")
  DOCKERFILE = File.join(EXAMPLES, "docker/Dockerfile")
  CONFIG = File.join(EXAMPLES, "docker/oribi.rb")
  DEPLOYMENT = File.join(EXAMPLES, "kubernetes/deployment.yaml")
  DOC = File.read(File.join(ROOT, "docs/DEPLOYMENT.md"))
  THRUSTER_STOP = 5 # seconds Thruster gives its own connections once the server exited

  # [[INSTRUCTION, arguments], ...], continuation lines joined, comments dropped.
  def self.instructions(text)
    text.gsub(/\\\n/, " ").lines.map(&:strip).reject { |l| l.empty? || l.start_with?("#") }
        .map { |l| l.split(/\s+/, 2) }
  end

  def instructions = self.class.instructions(File.read(DOCKERFILE))
  def final_stage = instructions.slice_before { |i, _| i == "FROM" }.to_a.last
  def container = YAML.safe_load_file(DEPLOYMENT).dig("spec", "template", "spec", "containers", 0)
  def pod = YAML.safe_load_file(DEPLOYMENT).dig("spec", "template", "spec")

  # The example config as the container reads it: from WORKDIR (/rails
  # there, dir here).
  def config(dir)
    Dir.chdir(dir) { Oribi::Config.load(config_file: CONFIG) }
  end

  def workdir = instructions.find { |i, _| i == "WORKDIR" }&.last

  def test_the_dockerfile_runs_rails_server_under_thruster_with_oribi
    cmd = final_stage.find { |i, _| i == "CMD" }&.last
    assert_equal ["./bin/thrust", "./bin/rails", "server"], JSON.parse(cmd)
    env = instructions.select { |i, _| i == "ENV" }.map(&:last).join(" ")
    assert_match(/\bRACKUP_HANDLER="oribi"/, env)
    assert_equal %w[3 1], [instructions.count { |i, _| i == "FROM" }.to_s, final_stage.count { |i, _| i == "FROM" }.to_s]
    refute_match(/puma/i, File.read(DOCKERFILE).lines.reject { |l| l.start_with?("#") }.join)
    # tmp/ (the control socket) belongs to the user the server runs as.
    assert final_stage.any? { |i, a| i == "RUN" && a.match?(/chown -R rails:rails .*\btmp\b/) }
    assert_equal [["USER", "1000:1000"]], final_stage.select { |i, _| i == "USER" }
  end

  # What the Dockerfile runs is what the docs tell a reader to run.
  def test_the_dockerfile_commands_are_the_documented_ones
    text = File.read(DOCKERFILE)
    commands = text.lines.grep(/^#   (docker) /).map { |l| l.delete_prefix("#").strip }
    assert_equal 2, commands.size
    cmd = final_stage.find { |i, _| i == "CMD" }
    (commands + ["CMD #{cmd.last}", 'RACKUP_HANDLER="oribi"', "examples/docker/oribi.rb"]).each do |c|
      assert DOC.include?(c), "docs/DEPLOYMENT.md does not show: #{c}"
    end
    # The README's Rails line names the same handler.
    assert_match(/bin\/rails server -u oribi/, File.read(File.join(ROOT, "README.md")))
  end

  # docs/RAILS.md's Thruster section: the Dockerfile line and the config
  # lines it gives are the example's.
  def test_the_rails_page_gives_the_examples_lines
    rails = File.read(File.join(ROOT, "docs/RAILS.md"))
    assert_includes rails, 'ENV RACKUP_HANDLER="oribi"'
    assert_includes DOC, 'ENV RACKUP_HANDLER="oribi"'
    block = rails[/`config\/oribi.rb` under Thruster.*?```ruby\n(.*?)```/m, 1]
    refute_nil block, "docs/RAILS.md has no config/oribi.rb block for Thruster"
    lines = block.lines.map(&:strip).reject { |l| l.empty? || l.start_with?("#") }
    assert_equal %w[bind shutdown_delay], lines.map { |l| l.split.first }
    example = File.read(CONFIG).lines.map(&:strip)
    lines.each { |l| assert_includes example, l, "docs/RAILS.md's line is not examples/docker/oribi.rb's" }
  end

  def test_the_deployment_fits_the_config
    Dir.mktmpdir do |dir|
      c = config(dir)
      here = ->(path) { path.sub(dir, workdir) }
      assert_equal "/rails", workdir
      grace = pod.fetch("terminationGracePeriodSeconds")
      assert_operator c[:shutdown_timeout] + THRUSTER_STOP, :<=, grace,
                      "shutdown_timeout #{c[:shutdown_timeout]} + Thruster's #{THRUSTER_STOP} s must fit in #{grace} s"
      ready = container.fetch("readinessProbe")
      assert_operator c[:shutdown_delay], :>=, ready["periodSeconds"] * ready["failureThreshold"],
                      "the delay must outlast the readiness probe's notice"
      assert_nil container.dig("lifecycle", "preStop"), "shutdown_delay replaces a preStop sleep"
      socket = here.call(c[:control].delete_prefix("unix://"))
      %w[startupProbe readinessProbe livenessProbe].each do |probe|
        command = container.dig(probe, "exec", "command")
        assert_equal ["curl", "-fsS", "--unix-socket", socket], command.first(4), probe
      end
      assert_equal "http://localhost/healthz", container.dig("livenessProbe", "exec", "command").last
      assert_equal "http://localhost/readyz", container.dig("readinessProbe", "exec", "command").last
      exposed = final_stage.find { |i, _| i == "EXPOSE" }.last.to_i
      assert_equal [exposed], container["ports"].map { |p| p["containerPort"] }
      # The worker count is the CPU limit's (cgroup): no WEB_CONCURRENCY.
      refute((container["env"] || []).any? { |e| e["name"] == "WEB_CONCURRENCY" })
      assert_match(/\A\d+\z/, container.dig("resources", "limits", "cpu"))
      assert_equal "json", c[:log_format]
    end
  end

  # The probes' own commands against a server started with the example
  # config: ready, healthy, then on TERM not ready while it still serves
  # and is alive, through shutdown_delay; then it drains and exits 0.
  def test_the_probes_work_against_a_real_server
    Dir.mktmpdir do |dir|
      FileUtils.mkdir_p(File.join(dir, "tmp"))
      port = free_port
      c = config(dir)
      probe = lambda do |name|
        cmd = container.dig(name, "exec", "command").map { |a| a.sub("/rails/", "#{dir}/") }
        system(*cmd, out: File::NULL, err: File::NULL)
      end
      srv = ServerProcess.new(File.join(ROOT, "examples/hello.ru"), "-C", CONFIG, workers: nil, tcp: true, port: port,
                                                                                  unix: false, env: { "PORT" => port.to_s }, spawn: { chdir: dir })
      assert wait_until(timeout: 10) { probe.call("startupProbe") }, srv.log
      assert probe.call("readinessProbe")
      assert probe.call("livenessProbe")
      term = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      Process.kill(:TERM, srv.pid)
      assert wait_until(timeout: c[:shutdown_delay] - 1) { !probe.call("readinessProbe") }, "readiness still passes"
      assert probe.call("livenessProbe"), "liveness must pass while stopping"
      assert_equal 200, HTTPClient.request(srv.tcp, "/", headers: { "Connection" => "close" }).status
      status = srv.wait_exit(c[:shutdown_timeout] + 5)
      assert status&.success?, "exit #{status.inspect}\n#{srv.log}"
      assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - term, :>=, c[:shutdown_delay]
      srv.log.lines.each { |l| JSON.parse(l) } # log_format json: every line
    ensure
      srv&.stop
    end
  end

  # examples/systemd/oribi.service against what DEPLOYMENT.md and RAILS.md
  # tell a team to write: a reload that is a hot restart (the docs named
  # ExecReload, the unit had none), and room to write for a Rails app's
  # SQLite databases (storage/), which ProtectSystem=strict forbids.
  def test_the_systemd_unit_is_what_the_docs_recommend
    unit = File.read(File.join(EXAMPLES, "systemd/oribi.service"))
    reload = "ExecReload=/bin/kill -USR2 $MAINPID"
    assert_includes unit.lines.map(&:strip), reload
    [DOC, File.read(File.join(ROOT, "docs/RAILS.md"))].each { |doc| assert_includes doc.gsub(/\s+/, " "), reload }
    writable = unit[/^ReadWritePaths=(.*)$/, 1].split
    dir = unit[/^WorkingDirectory=(.*)$/, 1]
    assert_equal %w[log tmp storage].map { |d| File.join(dir, d) }.sort, writable.sort
    # RAILS.md's sockets: their directory made by the unit, the listener's
    # path offered by the socket unit
    bind = File.read(File.join(ROOT, "docs/RAILS.md"))[%r{^bind "unix://(/run/[^"]+)"}, 1]
    assert_includes unit.lines.map(&:strip), "RuntimeDirectory=#{File.basename(File.dirname(bind))}"
    assert_includes File.read(File.join(EXAMPLES, "systemd/oribi.socket")), "ListenStream=#{bind}"
  end
end
