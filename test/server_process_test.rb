# frozen_string_literal: true

require_relative "test_helper"

# The tests' ServerProcess (test_helper.rb) against a port another server
# already holds, as when two tests running at once are handed the same free
# port: the new server fails to bind, and the other one accepts in its
# place. It must not pass for ready on the other's socket; it tries again
# on another port.
class ServerProcessTest < Minitest::Test
  # Chooses the given port the first time, a free one after.
  class HandedTakenPort < ServerProcess
    def initialize(taken, *args, **kw)
      @taken = [taken]
      super(*args, **kw)
    end

    private

    def free_port = @taken.shift || super
  end

  def test_a_port_another_server_holds_is_not_taken_for_its_own
    other = ServerProcess.new("env.ru", unix: false, env: { "RACK_ENV" => "other" })
    srv = HandedTakenPort.new(other.port, "env.ru", unix: false, env: { "RACK_ENV" => "mine" })
    refute_equal other.port, srv.port
    assert_equal "mine", HTTPClient.request(srv.tcp, "/").body.split.first
    assert_match(/listening on tcp:/, srv.log)
  ensure
    srv&.stop
    other&.stop
  end
end
