# frozen_string_literal: true

require "test_helper"

# The Ruby objects the C engine holds (each exchange's env callables and
# empty rack.input, each listener's SERVER_NAME and SERVER_PORT) are kept
# alive by the engine's mark function from the moment they exist. With a
# GC at every allocation (GC.stress) an object reachable only from the
# engine's C struct is collected at the next allocation: Engine.new raised
# "method 'method' called on terminated object" (or named the class that
# got the slot next), and a request without a Host could be given a
# collected SERVER_NAME.
class EngineGCTest < Minitest::Test
  def teardown
    @srv&.stop
  end

  # A worker whose Engine.new runs under GC.stress (only that: the whole
  # boot would take minutes), with two app threads (two exchanges) and
  # early hints (a second callable each), serves.
  def test_a_worker_whose_engine_was_made_under_gc_stress_serves
    Dir.mktmpdir do |dir|
      conf = File.join(dir, "oribi.rb")
      File.write(conf, <<~RUBY)
        Oribi::Engine.prepend(Module.new do
          def initialize(...)
            GC.stress = true
            super
          ensure
            GC.stress = false
          end
        end)
      RUBY
      @srv = ServerProcess.new("echo.ru", "-C", conf, "-t", "2", "--early-hints", workers: 1)
      sock = @srv.unix
      sock.write("GET / HTTP/1.0\r\n\r\n")
      res = HTTPClient.read_response(sock, timeout: 20)
      refute_nil res, @srv.log[/worker\[0\] failed: .*/]
      assert_equal 200, res.status
      assert_includes res.body, "SERVER_NAME: localhost\nSERVER_PORT: 80\n"
    ensure
      sock&.close
    end
  end

  # The same in the process: Engine.new under GC.stress, then a request
  # without a Host, whose SERVER_NAME and SERVER_PORT are the listener's.
  def test_engine_new_under_gc_stress_keeps_its_objects
    Dir.mktmpdir do |dir|
      listener = UNIXServer.new(File.join(dir, "s.sock"))
      tcp = TCPServer.new("127.0.0.1", 0)
      opts = Oribi::Config.new.engine_options.merge(multiprocess: false, started_ms: 0, threads: 2, early_hints: true)
      begin
        GC.stress = true
        engine = Oribi::Engine.new([listener.fileno, tcp.fileno], opts)
      ensure
        GC.stress = false
      end
      GC.start
      clients = [UNIXSocket.new(listener.path), TCPSocket.new("127.0.0.1", tcp.addr[1])]
      clients.each { |c| c.write("GET / HTTP/1.0\r\n\r\n") }
      envs = Array.new(2) { engine.next_request }
      names = envs.map { |env| [env["SERVER_NAME"], env["SERVER_PORT"]] }.sort
      assert_equal [["127.0.0.1", tcp.addr[1].to_s], %w[localhost 80]], names
      envs.each { |env| assert_kind_of Oribi::Engine::Hijack, env["rack.hijack"] }
      envs.each { |env| assert_equal "", env["rack.input"].read }
    ensure
      engine&.close
      clients&.each(&:close)
      listener&.close
      tcp&.close
    end
  end
end
