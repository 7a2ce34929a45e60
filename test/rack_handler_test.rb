# frozen_string_literal: true

require "test_helper"
require "open3"
require "rackup"
require "rackup/handler/oribi"
require "framework_process"

# The handler contract without a framework: how rackup-style options become
# an Oribi::Config, the registry lookups, and run/yield/stop on a real
# process. The frameworks themselves: rackup_test, sinatra_test, rails_test.
class RackHandlerTest < Minitest::Test
  Handler = Rackup::Handler::Oribi

  def config(**options) = Handler.config(options)

  def test_found_by_name_the_way_rackup_sinatra_and_rails_look_it_up
    assert_same Handler, Rackup::Handler.get(:oribi)
    assert_same Handler, Rackup::Handler.get("oribi")
    assert_same Handler, Rackup::Handler.pick(%w[oribi puma])
    assert_equal "Oribi", Handler.name.split("::").last # Rails prints "=> Booting Oribi"
  end

  def test_host_and_port_become_one_tcp_bind
    assert_equal ["tcp://127.0.0.1:8080"], config(Host: "127.0.0.1", Port: 8080)[:binds]
    assert_equal ["tcp://0.0.0.0:9393"], config(Host: "0.0.0.0", Port: "9393")[:binds]
  end

  def test_ipv6_hosts_are_bracketed
    assert_equal ["tcp://[::1]:8080"], config(Host: "::1", Port: 8080)[:binds]
    assert_equal ["tcp://[::]:8080"], config(Host: "[::]", Port: 8080)[:binds]
  end

  # localhost is both loopbacks whatever the resolver says (Listeners binds
  # ::1 where there is IPv6); another name, every address it resolves to.
  def test_a_name_binds_every_address_it_resolves_to
    assert_equal ["tcp://localhost:8080"], config(Host: "localhost", Port: 8080)[:binds]
    assert_equal 1, config(Host: "localhost", Port: 0)[:binds].size, "port 0 would differ per listener"
    local = Socket.ip_address_list.map(&:ip_address)
    name = Socket.gethostname
    expected = (Addrinfo.getaddrinfo(name, 80, nil, :STREAM).map(&:ip_address).uniq & local).map { |a| a.include?(":") ? "tcp://[#{a}]:8080" : "tcp://#{a}:8080" }
    assert_equal expected, config(Host: name, Port: 8080)[:binds] unless expected.empty?
  rescue SocketError
    nil # the host's own name does not resolve here
  end

  def test_an_address_this_machine_lacks_is_left_to_bind_to_refuse
    assert_equal ["tcp://192.0.2.1:8080"], config(Host: "192.0.2.1", Port: 8080)[:binds]
  end

  def test_a_path_or_a_uri_as_host
    assert_equal ["unix:///tmp/o.sock"], config(Host: "/tmp/o.sock", Port: 9292)[:binds]
    assert_equal ["unix:///tmp/o.sock"], config(Host: "unix:///tmp/o.sock", Port: 9292)[:binds]
    assert_equal ["tcp://127.0.0.2:81"], config(Host: "tcp://127.0.0.2:81", Port: 9292)[:binds]
  end

  def test_bind_replaces_host_and_port
    c = config(Host: "localhost", Port: 9292, Bind: "unix:///tmp/a.sock, tcp://127.0.0.1:81")
    assert_equal ["unix:///tmp/a.sock", "tcp://127.0.0.1:81"], c[:binds]
    assert_equal ["tcp://127.0.0.1:82"], config(Bind: ["tcp://127.0.0.1:82"])[:binds]
  end

  def test_no_host_nor_port_leaves_oribi_default
    refute config.set?(:binds)
    assert_equal ["tcp://0.0.0.0:7000"], config(Port: 7000)[:binds]
  end

  def test_bad_port
    assert_raises(Oribi::Config::Error) { config(Host: "127.0.0.1", Port: "http") }
    assert_raises(Oribi::Config::Error) { config(Host: "127.0.0.1", Port: 70_000) }
  end

  def test_command_line_strings_are_typed
    c = config(Workers: "3", Keepalive: "false", KeepaliveTimeout: "2.5", MaxBody: "1024", Tmpdir: "/var/tmp")
    assert_equal 3, c[:workers]
    assert_equal false, c[:keepalive]
    assert_in_delta 2.5, c[:keepalive_timeout]
    assert_equal 1024, c[:max_body]
    assert_equal "/var/tmp", c[:tmpdir]
    assert_equal true, config(Keepalive: true)[:keepalive] # `-O Keepalive` alone
    assert_equal 2, config(Workers: 2)[:workers] # from Ruby (Sinatra's server_settings)
  end

  def test_each_value_is_read_by_its_options_type
    assert_equal 0o600, config(UnixMode: "0600")[:unix_mode] # octal, as --unix-mode reads it
    assert_equal [100, 1000], config(ReforkAfter: "100,1000")[:refork_after]
    assert_equal [100], config(ReforkAfter: 100)[:refork_after]
    assert_equal "007", config(ControlToken: "007")[:control_token] # a string option stays one
  end

  def test_bad_values_are_refused_by_the_config
    e = assert_raises(Oribi::Config::Error) { config(Workers: "many") }
    assert_match(/invalid value for workers/, e.message)
    assert_raises(Oribi::Config::Error) { config(Keepalive: "1") }
    assert_raises(Oribi::Config::Error) { config(MaxHeaders: "0") }
  end

  def test_environment
    assert_equal "production", config(environment: "production")[:environment]
    refute config.set?(:environment) # Sinatra passes none: Oribi's default
  end

  def test_the_callers_own_options_are_left_alone
    out, err = capture_subprocess_io do
      c = config(config: "x.ru", pid: "/tmp/p", daemonize: false, AccessLog: [], DoNotReverseLookup: true,
                 workers: 7, server: "oribi", Host: "127.0.0.1", Port: 1)
      refute c.set?(:workers), "only CamelCase names are server options"
    end
    assert_empty out + err
  end

  # `rails server -u oribi` and `rackup -s oribi` read config/oribi.rb, as
  # Puma's handler reads config/puma.rb; what the user typed wins over it,
  # the caller's defaults (rails always passes Host and Port) do not.
  def test_the_config_file_is_read_under_the_options_the_user_gave
    Dir.mktmpdir do |d|
      FileUtils.mkdir_p(File.join(d, "config"))
      File.write(File.join(d, "config/oribi.rb"), "threads 3\nkeepalive_timeout 7\nbind \"unix:///tmp/x.sock\"\n")
      Dir.chdir(d) do
        c = config(Host: "localhost", Port: 3000, KeepaliveTimeout: "9", user_supplied_options: %i[KeepaliveTimeout])
        assert_equal 3, c[:threads]
        assert_equal 9, c[:keepalive_timeout]
        assert_equal ["unix:///tmp/x.sock"], c[:binds] # rails' default Host and Port did not replace it
        _, err = capture_subprocess_io { c = config(Host: "127.0.0.1", Port: 3001, user_supplied_options: %i[Port]) }
        assert_equal ["tcp://127.0.0.1:3001"], c[:binds] # a port the user typed did, and the log says so
        assert_includes err, "listening on tcp://127.0.0.1:3001 in place of config/oribi.rb's bind unix:///tmp/x.sock: Port 3001 was typed"
      end
      other = File.join(d, "other.rb")
      File.write(other, "threads 4\n")
      assert_equal 4, config(ConfigFile: other)[:threads]
    end
  end

  # Rails counts $PORT (a front proxy's, Thruster's) as a typed -p and
  # passes its default host with it; the command line it hands over for
  # restarts says what was typed. Only a typed -p/-b replaces the file's
  # bind, and the log says so.
  def test_under_rails_only_a_typed_p_or_b_replaces_the_files_bind
    Dir.mktmpdir do |d|
      FileUtils.mkdir_p(File.join(d, "config"))
      File.write(File.join(d, "config/oribi.rb"), "bind \"tcp://127.0.0.1:3000\"\n")
      rails = ->(args, **more) { { Host: "0.0.0.0", Port: 3000, user_supplied_options: %i[Port], restart_cmd: "bin/rails server #{args}--restart" }.merge(more) }
      Dir.chdir(d) do
        out, err = capture_subprocess_io { assert_equal ["tcp://127.0.0.1:3000"], config(**rails.call(""))[:binds] }
        assert_empty out + err
        { "-p 3001 " => ["tcp://0.0.0.0:3001", "-p 3001"], "--port=3001 " => ["tcp://0.0.0.0:3001", "--port=3001"],
          "-b 127.0.0.2 " => ["tcp://127.0.0.2:3000", "-b 127.0.0.2"], "-b127.0.0.2 -P x.pid " => ["tcp://127.0.0.2:3000", "-b127.0.0.2"],
          "-e production --binding 127.0.0.2 -p 3001 " => ["tcp://127.0.0.2:3001", "--binding 127.0.0.2 -p 3001"] }.each do |args, (bind, flags)|
          host = args[/(?:-b|--binding) ?(\S+)/, 1] || "0.0.0.0"
          port = args[/(?:-p|--port=) ?(\d+)/, 1]&.to_i || 3000
          c = nil
          _, err = capture_subprocess_io { c = config(**rails.call(args, Host: host, Port: port, user_supplied_options: %i[Host Port])) }
          assert_equal [bind], c[:binds], args
          assert_includes err, "listening on #{bind} in place of config/oribi.rb's bind tcp://127.0.0.1:3000: " \
                               "#{flags} #{flags.include?(' -') ? 'were' : 'was'} typed on the command line", args
        end
      end
      # no bind in the file: $PORT and Rails' default host listen
      assert_equal ["tcp://0.0.0.0:3000"], Dir.chdir(File.join(d, "config")) { config(**rails.call(""))[:binds] }
    end
  end

  def test_unknown_server_option_is_named
    _, err = capture_subprocess_io { config(Wokers: "2") }
    assert_match(/ignoring unknown server option Wokers/, err)
  end

  def test_valid_options_cover_every_settable_option
    opts = Handler.valid_options
    %w[Host=HOST Port=PORT Bind=URI[,URI...] Workers=N Keepalive=true|false].each { |k| assert_includes opts, k }
    (Oribi::Config::OPTIONS.keys - Oribi::RackHandler::NOT_OPTIONS).each do |name|
      camel = name.to_s.split("_").map(&:capitalize).join
      assert(opts.keys.any? { |k| k.start_with?("#{camel}=") }, "#{camel} missing from valid_options")
      assert config(camel.to_sym => Oribi::Config.new[name]).set?(name), "#{camel} not mapped"
    end
  end

  def test_stop_before_run_serves_nothing
    launcher = Oribi::RackHandler::Launcher.new(Oribi::Config.new(binds: ["tcp://127.0.0.1:0"], workers: 1))
    launcher.stop
    Timeout.timeout(5) { assert_equal 0, launcher.run(->(_) { [200, {}, []] }) }
    launcher.stop # again, after the run: Sinatra does
  end

  # The contract on a real process: run yields something with #stop, the
  # module answers #shutdown, and either ends the server gracefully (run
  # returns, exit 0). "thread": a thread of the server process makes a
  # request, then stops it (as Sinatra's traps and at_exit do, from outside
  # the app); "request": the app itself calls shutdown.
  STOPPER = <<~'RUBY'
    require "socket"
    require "rackup/handler/oribi"
    port, workers, via = ARGV
    app = lambda do |env|
      Rackup::Handler::Oribi.shutdown if env["PATH_INFO"] == "/stop"
      [200, { "content-type" => "text/plain" }, ["served"]]
    end
    Rackup::Handler::Oribi.run(app, Host: "127.0.0.1", Port: port, Workers: workers) do |server|
      next unless via == "thread"

      Thread.new do
        loop do
          s = TCPSocket.new("127.0.0.1", Integer(port))
          s.write("GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
          break if s.read.end_with?("served")
        rescue SystemCallError
          sleep 0.02
        end
        $stderr.puts "got a response"
        server.stop
      end
    end
    $stderr.puts "run returned"
  RUBY

  def stopper(workers, via) = [RbConfig.ruby, "-I", File.join(ROOT, "lib"), "-e", STOPPER, "PORT", workers.to_s, via]

  def test_the_yielded_server_stops_a_prefork_server_from_a_thread
    srv = FrameworkProcess.new(ready: false) { |port| stopper(2, "thread").map { |a| a == "PORT" ? port.to_s : a } }
    assert srv.wait_exit(20)&.success?, "did not stop:\n#{srv.log}"
    assert_match(/got a response.*run returned/m, srv.log)
  ensure
    srv&.stop
  end

  def test_shutdown_from_the_app_stops_a_single_process_server
    srv = FrameworkProcess.new { |port| stopper(1, "request").map { |a| a == "PORT" ? port.to_s : a } }
    assert_equal "served", HTTPClient.request(srv.tcp, "/stop").body
    assert srv.wait_exit(20)&.success?, "did not stop:\n#{srv.log}"
    assert_match(/run returned/, srv.log)
  ensure
    srv&.stop
  end

  def test_the_yielded_server_stops_a_single_process_server_from_a_thread
    # (A signal arriving while the loop sleeps in epoll_wait must bring it
    # back to Ruby even after another Ruby thread has come and gone.)
    srv = FrameworkProcess.new(ready: false) { |port| stopper(1, "thread").map { |a| a == "PORT" ? port.to_s : a } }
    assert srv.wait_exit(20)&.success?, "did not stop:\n#{srv.log}"
  ensure
    srv&.stop
  end

  # Rack 2's registry stores class names and finds them with const_get.
  # Rack 2 cannot share a bundle with Oribi (rack >= 3 in the gemspec), so
  # its two calls are stood in for in a separate process.
  def test_rack2_handler_file_registers_with_rack2_only
    rack2 = <<~RUBY
      require "rack"
      module Rack
        def self.release = "2.2.10"
        module Handler
          def self.register(name, klass) = (@handlers ||= {})[name.to_s] = klass.to_s
          def self.get(name) = const_get(@handlers.fetch(name.to_s))
        end
      end
      require "rack/handler/oribi"
      h = Rack::Handler.get("oribi")
      print h.name, " ", h.respond_to?(:run), " ", h.valid_options.key?("Workers=N")
    RUBY
    out, err, st = Open3.capture3(RbConfig.ruby, "-I", File.join(ROOT, "lib"), "-e", rack2)
    assert st.success?, err
    assert_equal "Rack::Handler::Oribi true true", out

    rack3 = 'require "rack/handler/oribi"; print defined?(Rack::Handler).inspect'
    out, err, st = Open3.capture3(RbConfig.ruby, "-I", File.join(ROOT, "lib"), "-e", rack3)
    assert st.success?, err
    assert_equal "nil", out, "on Rack 3 the file defines nothing"
  end
end
