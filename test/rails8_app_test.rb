# frozen_string_literal: true

require "test_helper"
require "framework_process"
require "json"
require "securerandom"
require "uri"
require_relative "support/websocket"

# The Rails 8 default app, whole: `rails new` with no options (Solid Queue,
# Solid Cache, Solid Cable, Thruster, importmap, propshaft), its gems from
# the registry at test time, set up as docs/RAILS.md says (the Gemfile line,
# config/oribi.rb, RACKUP_HANDLER=oribi), built and started as its own
# Dockerfile does (assets:precompile, then bin/docker-entrypoint with the
# Dockerfile's CMD, `./bin/thrust ./bin/rails server`), in production with
# the production.rb it was generated with. Through Thruster: pages answer,
# a job a request enqueues runs (Oribi's solid_queue), an Action Cable
# client gets a broadcast (Solid Cable), the assets' second requests are
# Thruster's, and a TERM loses no request.
#
# Minutes of installing on a cold machine: it runs under ORIBI_RAILS_NEW=1
# only, which CI sets on Ruby 3.4 (.ci/run), and fails there, not skips,
# when something is missing. ORIBI_RAILS_NEW_GEMS names a directory to keep
# the gems in between runs (a fresh one each run without it).
class Rails8AppTest < Minitest::Test
  RAILS = "~> 8.1.0"
  DOC = File.join(ROOT, "docs/RAILS.md")
  # shutdown_delay in docs/RAILS.md's Thruster config: TERM to the end of the delay
  DELAY = 5

  def setup
    unless ENV["ORIBI_RAILS_NEW"] == "1"
      skip "the Rails 8 default app installs Rails from the registry (minutes): ORIBI_RAILS_NEW=1 runs it, " \
           "as CI does on Ruby 3.4 (.ci/rubies test 3.4 env ORIBI_RAILS_NEW=1 bundle exec rake test " \
           "TEST=test/rails8_app_test.rb)"
    end
    flunk "Rails 8.1 needs Ruby 3.2 or later, this is #{RUBY_VERSION}: run it in the 3.4 chroot (.ci/rubies)" if RUBY_VERSION < "3.2"
    @tmp = Dir.mktmpdir("oribi-rails8")
    @gems = ENV.fetch("ORIBI_RAILS_NEW_GEMS") { File.join(shared, "gems") }
    @steps = []
  end

  # What the class's tests share, made once (minutes): the gems, the
  # extension's build, the app as built; each test runs a copy of it.
  def self.shared
    @shared ||= Dir.mktmpdir("oribi-rails8-shared").tap { |d| Minitest.after_run { FileUtils.rm_rf(d) } }
  end

  def shared = self.class.shared

  def teardown
    @srv&.stop
    FileUtils.rm_rf(@tmp) if @tmp
  end

  # What the app's commands run with, and nothing of the suite's bundle
  # (BUNDLE_*, RUBYOPT from `bundle exec rake`): a home of their own, gems
  # installed into @gems. The gems the suite's bundle holds are found too
  # (Gem.path): their native extensions are built already, a CI minute or
  # two; the registry gives the rest. Without the development and test
  # groups, as the Dockerfile's bundle leaves out development.
  def app_env
    passed = ENV.slice("LANG", "LC_ALL", "TZ", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR",
                       *%w[http_proxy https_proxy no_proxy].flat_map { |k| [k, k.upcase] })
    passed.merge("PATH" => "#{@gems}/bin:#{ENV.fetch('PATH')}", "HOME" => File.join(shared, "home"),
                 "GEM_HOME" => @gems, "GEM_PATH" => [@gems, *Gem.path].uniq.join(":"),
                 "BUNDLE_JOBS" => "2", "BUNDLE_WITHOUT" => "development:test",
                 "ORIBI_BUILD_DIR" => File.join(shared, "oribi-build"))
  end

  # One step of the setup, its output in a log of its own; a failure
  # shows the end of it. Timed, wall and CPU, for the summary.
  def run_step(name, *cmd, chdir: @app, env: {}, timeout: 600)
    log = File.join(@tmp, "#{name.tr(' :', '--')}.log")
    FileUtils.mkdir_p(File.join(shared, "home"))
    started = now
    cpu = Process.times.then { |t| t.cutime + t.cstime }
    group = Oribi::ProcessGroup.new(cmd, log: log, env: app_env.merge(env), chdir: chdir, unsetenv_others: true)
    status = group.reap(timeout: timeout) || group.stop(:KILL)
    @steps << [name, now - started, Process.times.then { |t| t.cutime + t.cstime } - cpu]
    assert status.success?, "#{name} (#{cmd.join(' ')} in #{chdir}): #{status.inspect}" \
                            "#{" after #{timeout} s" if now - started >= timeout}\n#{log_end(File.read(log), 6000)}"
    File.read(log)
  end

  # docs/RAILS.md's ```ruby block whose text matches re.
  def doc_block(re)
    File.read(DOC).scan(/^```ruby\n(.*?)^```/m).flatten.find { |b| b.match?(re) } or flunk "no ruby block in #{DOC} matches #{re}"
  end

  def rails_new
    # Bundler, not `gem install rails -v '~> 8.1.0'`: that takes the newest
    # 8.1 even when the registry lacks one of its parts (it had rails
    # 8.1.4.1 without actionmailbox 8.1.4.1), where Bundler resolves to the
    # newest whole one.
    dir = File.join(shared, "rails")
    FileUtils.mkdir_p(dir)
    File.write(File.join(dir, "Gemfile"), %(source "https://rubygems.org"\ngem "rails", "#{RAILS}"\n))
    run_step("gem install rails", "bundle", "install", chdir: dir)
    version = File.read(File.join(dir, "Gemfile.lock"))[/^    rails \(([\d.]+)\)$/, 1] or flunk "no rails in the lock"
    # rails _VERSION_: the suite's gems may hold a newer railties than the
    # registry has whole. RAILS_ENV=production for rails new's own steps
    # (importmap:install, solid_queue:install, ... through bin/rails): the
    # development group they would load is not installed. They write the
    # same files.
    out = run_step("rails new", "rails", "_#{version}_", "new", @app, chdir: shared, env: { "RAILS_ENV" => "production" })
    # rails new goes on (and exits 0) when one of its steps fails
    %w[config/importmap.rb config/queue.yml db/queue_schema.rb db/cable_schema.rb db/cache_schema.rb bin/thrust
       bin/docker-entrypoint Dockerfile Gemfile.lock].each do |f|
      assert File.exist?(File.join(@app, f)), "rails new made no #{f}:\n#{log_end(out, 6000)}"
    end
    assert_match(/adapter: solid_cable/, File.read(File.join(@app, "config/cable.yml")))
    version
  end

  # The Gemfile line in place of puma's, config/oribi.rb: docs/RAILS.md's
  # own text, taken from it. Its example config binds a unix socket in
  # /run/app; behind Thruster its Thruster section's bind replaces that.
  def set_up_as_the_docs_say
    gemfile = File.join(@app, "Gemfile")
    text = File.read(gemfile)
    puma = text[/^gem "puma".*$/] or flunk "no puma in the Gemfile rails new wrote:\n#{text}"
    line = doc_block(/^# Gemfile/)[/^# (gem "oribi", path: .*?require: false)/, 1] or flunk "no path: line in #{DOC}"
    # and async, as docs/RAILS.md's "Requests as fibers" says for fibers:
    # loaded by a worker in that mode only, unused otherwise
    fibers = File.read(DOC)[/^## Requests as fibers\n.*?`(gem "async")`/m, 1] or flunk "no gem line in #{DOC}'s fibers section"
    File.write(gemfile, "#{text.sub(puma, line.sub(/path: "[^"]*"/, "path: #{ROOT.dump}"))}#{fibers}\n")
    run_step("bundle install", "bundle", "install")

    base = doc_block(/^workers ENV.fetch/).lines.grep_v(/^(bind|control) /).join
    config = [base, doc_block(/^# Behind Thruster only/), doc_block(/^solid_queue /)].join("\n")
    assert_match(/^shutdown_delay #{DELAY}$/, config)
    File.write(File.join(@app, "config/oribi.rb"), config)
  end

  # What a team adds: a page in the app's layout, a form that enqueues a
  # job, a channel and a request that broadcasts to it, a slow request.
  def add_probes
    routes = File.join(@app, "config/routes.rb")
    File.write(routes, File.read(routes).sub(/^end\s*\z/, <<~RUBY))
        get "probe" => "probes#show"
        post "probe/jobs" => "probes#enqueue"
        get "probe/broadcast" => "probes#broadcast"
        get "probe/nap" => "probes#nap"
        get "probe/hello" => "probes#hello"
        get "probe/wait" => "probes#wait"
        get "probe/live" => "live#show"
      end
    RUBY
    # until tmp/release exists, polling as a request waiting on something would
    write("app/controllers/concerns/release.rb", <<~RUBY)
      module Release
        def started(name) = FileUtils.touch(Rails.root.join("tmp", name))

        def until_released
          sleep 0.02 until File.exist?(Rails.root.join("tmp", "release"))
        end
      end
    RUBY
    write("app/controllers/live_controller.rb", <<~RUBY)
      class LiveController < ApplicationController
        include ActionController::Live
        include Release

        def show
          response.headers["Content-Type"] = "text/event-stream"
          response.stream.write("data: first \#{Integer(params[:id])}\\n\\n")
          started("live-\#{Integer(params[:id])}")
          until_released
          response.stream.write("data: last\\n\\n")
        ensure
          response.stream.close
        end
      end
    RUBY
    write("app/controllers/probes_controller.rb", <<~RUBY)
      class ProbesController < ApplicationController
        include Release

        def show = render(html: "<h1>Oribi</h1>".html_safe, layout: true)

        def enqueue
          ProbeJob.perform_later(Integer(params[:id]))
          render plain: "enqueued by \#{Process.pid}"
        end

        def broadcast
          ActionCable.server.broadcast("probe", { text: params[:text] })
          render plain: "broadcast"
        end

        def nap
          FileUtils.touch(Rails.root.join("tmp", "nap-\#{Integer(params[:id])}"))
          sleep Float(params[:s])
          render plain: "napped"
        end

        def hello = render(plain: "hello")

        def wait
          started("wait-\#{Integer(params[:id])}")
          until_released
          render plain: "waited"
        end
      end
    RUBY
    # and a resource with its pages, as `rails generate scaffold` makes it
    run_step("generate scaffold", "bin/rails", "generate", "scaffold", "Note", "title:string", env: { "RAILS_ENV" => "production" })
    write("app/jobs/probe_job.rb", <<~RUBY)
      class ProbeJob < ApplicationJob
        def perform(id) = File.write(Rails.root.join("tmp", "job-\#{id}"), Process.pid.to_s)
      end
    RUBY
    write("app/channels/probe_channel.rb", <<~RUBY)
      class ProbeChannel < ActionCable::Channel::Base
        def subscribed = stream_from("probe")
      end
    RUBY
  end

  def write(path, text) = File.write(File.join(@app, path).tap { |f| FileUtils.mkdir_p(File.dirname(f)) }, text)

  def dockerfile = File.read(File.join(@app, "Dockerfile"))

  # The Dockerfile's build steps that matter here: the assets, and the
  # extension of the `path:` gem (docs/RAILS.md: built ahead, a production
  # boot does not build it; a no-op when the checkout has it built).
  def build
    precompile = dockerfile[/^RUN (SECRET_KEY_BASE_DUMMY=1 \.\/bin\/rails assets:precompile)$/, 1] or
      flunk "no assets:precompile step in the Dockerfile:\n#{dockerfile}"
    run_step("assets:precompile", "sh", "-c", precompile, env: { "RAILS_ENV" => "production" })
    run_step("oribi build", "bundle", "exec", "ruby", "-roribi", "-e0", env: { "ORIBI_BUILD" => "1", "RAILS_ENV" => "production" })
  end

  # ENTRYPOINT and CMD as the Dockerfile has them (the entrypoint prepares
  # the database, then execs Thruster), with docs/RAILS.md's ENV line and
  # Kamal's SOLID_QUEUE_IN_PUMA (config/deploy.yml) for config/oribi.rb's
  # solid_queue line.
  def start
    entrypoint = JSON.parse(dockerfile[/^ENTRYPOINT (\[.*\])$/, 1]).first.delete_prefix("/rails/")
    cmd = JSON.parse(dockerfile[/^CMD (\[.*\])$/, 1])
    assert_equal %w[./bin/thrust ./bin/rails server], cmd
    handler = File.read(DOC)[/^ENV RACKUP_HANDLER="(\w+)"$/, 1]
    assert_equal "oribi", handler
    assert_match(/SOLID_QUEUE_IN_PUMA: true/, File.read(File.join(@app, "config/deploy.yml")))
    @target = free_port # Oribi's, behind Thruster
    env = app_env.merge("RAILS_ENV" => "production", "RACKUP_HANDLER" => handler, "SOLID_QUEUE_IN_PUMA" => "true",
                        "BUNDLE_GEMFILE" => File.join(@app, "Gemfile"), "TARGET_PORT" => @target.to_s)
    started = now
    @srv = FrameworkProcess.new(env: env, chdir: @app, spawn: { unsetenv_others: true }, boot_timeout: 180) do |port|
      env["HTTP_PORT"] = port.to_s # read when the process is spawned, after this block
      [File.join(@app, entrypoint), *cmd]
    end
    # Thruster listens at once and answers 502 until the app is up.
    assert wait_until(timeout: 120, interval: 0.2) { get("/up")&.status == 200 }, "no 200 on /up\n#{log_end(@srv.log, 6000)}"
    @steps << ["db:prepare and boot", now - started, nil]
    assert_match(/Oribi .* env production/, @srv.log)
  end

  def get(path, headers = {})
    s = @srv.tcp
    HTTPClient.request(s, path, headers: { "Host" => host, "Connection" => "close" }.merge(headers))
  rescue SystemCallError, EOFError
    nil
  ensure
    s&.close
  end

  def host = "127.0.0.1:#{@srv.port}"

  def access_log = File.read(File.join(@app, "log/access.log"))

  def requests_logged(path) = access_log.scan(/"GET #{Regexp.escape(path)} HTTP/).size

  # The app as the tests start from it: made once in the shared directory
  # (rails new, the docs' setup, the probes, the build), copied for each
  # test, which may change its copy. Returns the Rails version.
  def app
    template = File.join(shared, "app")
    done = File.join(shared, "app-built")
    unless File.exist?(done)
      @app = template
      FileUtils.rm_rf(template)
      version = rails_new
      set_up_as_the_docs_say
      add_probes
      build
      File.write(done, version)
    end
    @app = File.join(@tmp, "app")
    system("cp", "-a", template, @app, exception: true)
    File.read(done)
  end

  def test_the_default_app_serves_runs_jobs_broadcasts_and_loses_nothing_on_term
    version = app
    start

    page = get("/probe")
    assert_equal 200, page&.status, log_end(@srv.log, 6000)
    assert_includes page.body, "<h1>Oribi</h1>"
    assert_equal 200, get("/icon.png")&.status

    enqueue_a_job(page)
    receive_a_broadcast
    assets_from_thruster(page)
    term_loses_nothing
    summary = @steps.map { |n, wall, cpu| format("%s %.0f s", n, wall) + (cpu ? format(" (CPU %.0f s)", cpu) : "") }.join(", ")
    puts "\nRails #{version} default app behind Thruster on Oribi: #{summary}"
  end

  # docs/RAILS.md's "Requests as fibers" in the same app: its
  # isolation_level line in config/application.rb, `fibers` in place of
  # `threads` in config/oribi.rb. A resource's pages create, read, update
  # and delete (ActiveRecord leasing per fiber); forty requests wait at
  # once where two workers of three threads would hold six; Live streams
  # stay open while a hello answers; Action Cable takes its socket through
  # rack.hijack from a fiber.
  def test_the_default_app_as_fibers_crud_waits_live_and_cable
    app
    isolation = doc_block(/isolation_level = :fiber/).strip
    application = File.join(@app, "config/application.rb")
    text = File.read(application)
    File.write(application, text.sub(/^(\s*)config\.load_defaults .*$/) { "#{$&}\n#{$1}#{isolation}" })
    config = File.join(@app, "config/oribi.rb")
    File.write(config, File.read(config).sub(/^threads .*$/, "fibers 64"))
    start
    assert_match(/up to 64 requests per worker as fibers/, @srv.log)

    crud
    waits = 40.times.map { |i| direct("/probe/wait?id=#{i}") }
    lives = 10.times.map { |i| direct("/probe/live?id=#{i}") }
    firsts = lives.each_with_index.map { |s, i| read_until(s, "data: first #{i}\n\n") }
    assert firsts.all?, "Live streams without their first event: #{firsts.count(nil)} of 10\n#{log_end(@srv.log, 4000)}"
    started = 40.times.map { |i| File.join(@app, "tmp/wait-#{i}") }
    assert wait_until(timeout: 30) { started.all? { |f| File.exist?(f) } },
           "#{started.count { |f| File.exist?(f) }} of 40 waits started\n#{log_end(@srv.log, 4000)}"
    hello = direct("/probe/hello")
    assert_equal [200, "hello"], HTTPClient.read_response(hello, timeout: 10)&.then { |r| [r.status, r.body] },
                 "a hello while 40 requests wait and 10 streams are open"
    FileUtils.touch(File.join(@app, "tmp/release"))
    assert_equal [[200, "waited"]] * 40, waits.map { |s| HTTPClient.read_response(s, timeout: 20)&.then { |r| [r.status, r.body] } }
    lives.each { |s| assert_match(/data: last\n\n\r\n0\r\n\r\n\z/, HTTPClient.read_to_close(s, timeout: 20)) }
    receive_a_broadcast
  ensure
    [*waits, *lives, hello].each { |s| s&.close }
  end

  # A request straight to Oribi, past Thruster; the socket to read from
  def direct(path)
    s = TCPSocket.new("127.0.0.1", @target)
    s.write("GET #{path} HTTP/1.1\r\nHost: #{host}\r\nConnection: close\r\n\r\n")
    s
  end

  # What the socket sent up to and with text; nil if not within 20 s
  def read_until(sock, text)
    deadline = now + 20
    out = +""
    out << (HTTPClient.read_some(sock, 4096, deadline) or return nil) until out.include?(text)
    out
  rescue Timeout::Error
    nil
  end

  # A browser's round through the scaffold's pages: each form posted with
  # its own token and the session's cookies, each redirect followed.
  def crud
    @cookies = {}
    form = form_of(browse("GET", "/notes/new"), "/notes")
    created = browse("POST", "/notes", form.merge("note[title]" => "first"))
    assert_includes [302, 303], created.status, created.body[0, 500]
    path = URI(created["location"]).path
    assert_match(%r{\A/notes/\d+\z}, path)
    assert_includes browse("GET", path).body, "first"
    updated = browse("POST", path, form_of(browse("GET", "#{path}/edit"), path).merge("note[title]" => "second"))
    assert_includes [302, 303], updated.status, updated.body[0, 500]
    assert_includes browse("GET", path).body, "second"
    destroy = form_of(browse("GET", path), path, "delete")
    assert_includes [302, 303], browse("POST", path, destroy).status
    assert_equal 404, browse("GET", path).status
  end

  def browse(method, path, form = nil)
    headers = { "Host" => host, "Connection" => "close", "Cookie" => @cookies.map { |k, v| "#{k}=#{v}" }.join("; ") }
    headers["Content-Type"] = "application/x-www-form-urlencoded" if form
    s = @srv.tcp
    res = HTTPClient.request(s, path, method: method, headers: headers, body: form && URI.encode_www_form(form))
    Array(res["set-cookie"]).each { |c| @cookies.store(*c.split(";").first.split("=", 2)) }
    assert_operator res.status, :<, 500, "#{method} #{path}: #{res.body[0, 500]}\n#{log_end(@srv.log, 4000)}"
    res
  ensure
    s&.close
  end

  # The hidden fields of the page's form posting to action (with _method
  # method when given): its token, its _method
  def form_of(page, action, method = nil)
    forms = page.body.scan(%r{<form\b[^>]*\baction="#{Regexp.escape(action)}"[^>]*>(.*?)</form>}m).flatten
    fields = forms.map { |f| f.scan(/<input\b[^>]*type="hidden"[^>]*>/).to_h { |i| [i[/name="([^"]+)"/, 1], i[/value="([^"]*)"/, 1]] } }
    fields.find { |f| method.nil? || f["_method"] == method } or flunk "no form to #{action} #{method}:\n#{page.body[0, 3000]}"
  end

  # A form's POST with the page's CSRF token and session cookie; the job
  # runs in Solid Queue's worker, which Oribi's master runs.
  def enqueue_a_job(page)
    token = page.body[/<meta name="csrf-token" content="([^"]+)"/, 1] or flunk "no CSRF token on the page"
    cookie = Array(page["set-cookie"]).map { |c| c.split(";").first }.join("; ")
    refute_empty cookie, "no session cookie"
    body = URI.encode_www_form(authenticity_token: token, id: 1)
    s = @srv.tcp
    res = HTTPClient.request(s, "/probe/jobs", method: "POST", body: body,
                                               headers: { "Host" => host, "Connection" => "close", "Cookie" => cookie,
                                                          "Content-Type" => "application/x-www-form-urlencoded" })
    s.close
    assert_equal 200, res.status, "POST /probe/jobs: #{res.body[0, 500]}\n#{log_end(@srv.log, 4000)}"
    web = res.body[/enqueued by (\d+)/, 1].to_i
    job = File.join(@app, "tmp/job-1")
    assert wait_until(timeout: 60, interval: 0.1) { File.exist?(job) }, "the job never ran\n#{log_end(@srv.log, 6000)}"
    refute_equal web, File.read(job).to_i, "the job ran in the web worker"
    assert_match(/solid_queue: supervisor started, pid \d+/, @srv.log)
  end

  # [type or message, parsed] of the next Action Cable message, pings skipped.
  def cable_message(sock, deadline)
    loop do
      opcode, payload = WebSocket.decode(WebSocket::Reader.new(sock, deadline))
      flunk "the cable closed: #{payload.inspect}\n#{log_end(@srv.log, 4000)}" if opcode.nil? || opcode == WebSocket::CLOSE
      next unless opcode == WebSocket::TEXT

      msg = JSON.parse(payload)
      return msg unless msg["type"] == "ping"
    end
  end

  # The handshake with the Origin the app accepts (its own host: production
  # sets no allowed origins), the welcome, a subscription, then a broadcast
  # an HTTP request makes, through Solid Cable's table.
  def receive_a_broadcast
    key = SecureRandom.base64(16)
    sock = @srv.tcp
    sock.write(WebSocket.upgrade_request("/cable", host: host, key: key,
                                                   headers: { "Origin" => "http://#{host}",
                                                              "Sec-WebSocket-Protocol" => "actioncable-v1-json" }))
    res = HTTPClient.read_response(sock)
    assert_equal 101, res&.status, "no upgrade on /cable: #{res&.raw}#{res&.body}\n#{log_end(@srv.log, 4000)}"
    assert_equal WebSocket.accept(key), res["sec-websocket-accept"]
    deadline = now + 30
    assert_equal({ "type" => "welcome" }, cable_message(sock, deadline).slice("type"))
    identifier = { channel: "ProbeChannel" }.to_json
    sock.write(WebSocket.encode({ command: "subscribe", identifier: identifier }.to_json, mask: SecureRandom.bytes(4)))
    assert_equal({ "identifier" => identifier, "type" => "confirm_subscription" }, cable_message(sock, deadline))
    text = "from a request #{SecureRandom.hex(4)}"
    assert_equal 200, get("/probe/broadcast?#{URI.encode_www_form(text: text)}")&.status
    assert_equal({ "identifier" => identifier, "message" => { "text" => text } }, cable_message(sock, deadline))
  ensure
    sock&.close
  end

  # The page's assets (stylesheet, importmap's scripts): the first request
  # of each reaches Oribi and Thruster keeps the answer (cache-control
  # public, from production.rb), the second is Thruster's alone.
  def assets_from_thruster(page)
    paths = page.body.scan(%r{"(/assets/[^"]+)"}).flatten.uniq
    assert paths.any? { |p| p.end_with?(".css") } && paths.any? { |p| p.end_with?(".js") }, "no assets on the page:\n#{page.body}"
    # Thruster stores an answer as it passes it on: a request right after the
    # first may still miss (seen once in CI), so the second is asked until it hits
    misses = paths.to_h do |path|
      first = get(path)
      assert_equal [200, "miss"], [first&.status, first&.[]("x-cache")], path
      seen = []
      second = wait_until(timeout: 5, interval: 0.05) do
        res = get(path)
        seen << res&.[]("x-cache")
        res if res&.[]("x-cache") == "hit"
      end
      assert_equal 200, second&.status, "#{path}: never served from Thruster's cache (#{seen.tally})"
      assert second.body == first.body, "#{path}: Thruster's copy differs"
      [path, seen.count("miss")]
    end
    # a request after them, logged once those before it were
    assert_equal 200, get("/probe/hello")&.status
    assert wait_until { requests_logged("/probe/hello") == 1 }, access_log
    paths.each do |path|
      assert_equal 1 + misses[path], requests_logged(path), "#{path} reached Oribi past Thruster's misses:\n#{access_log}"
    end
  end

  # Requests in flight at TERM (Thruster relays it), and a client every
  # 20 ms through the shutdown_delay: every one answered 200, and both
  # Thruster and Oribi exit 0.
  def term_loses_nothing
    napping = 4.times.map do |i|
      s = @srv.tcp
      s.write("GET /probe/nap?s=1&id=#{i} HTTP/1.1\r\nHost: #{host}\r\nConnection: close\r\n\r\n")
      s
    end
    naps = 4.times.map { |i| File.join(@app, "tmp/nap-#{i}") }
    assert wait_until(timeout: 30) { naps.all? { |f| File.exist?(f) } }, "the naps never started"
    term = now
    seen = []
    prober = Thread.new do
      while now < term + DELAY - 0.5
        at = now
        seen << (get("/probe/hello")&.status || :failed)
        sleep [0.02 - (now - at), 0].max # the client's pace
      end
    end
    Process.kill(:TERM, @srv.pid)
    in_flight = napping.map { |s| HTTPClient.read_response(s, timeout: 20)&.status }
    prober.join
    assert_equal [200] * 4, in_flight, "requests in flight at TERM\n#{log_end(@srv.log, 4000)}"
    assert_operator seen.size, :>=, 20, "too few probes: #{seen.tally}"
    assert_equal({ 200 => seen.size }, seen.tally, "probes during shutdown_delay\n#{log_end(@srv.log, 4000)}")
    status = @srv.wait_exit(60)
    assert status&.success?, "thrust exit #{status.inspect}\n#{log_end(@srv.log, 6000)}"
    assert_match(/TERM: readiness 503, serving #{DELAY}(\.0)? s more/, @srv.log)
    assert_match(/solid_queue: stopping the supervisor/, @srv.log)
  ensure
    napping&.each(&:close)
  end
end
