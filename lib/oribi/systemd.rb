# frozen_string_literal: true

require "socket"

module Oribi
  # sd_notify(3) without libsystemd: datagrams to $NOTIFY_SOCKET saying
  # READY=1 once the workers serve, STOPPING=1 when draining, and WATCHDOG=1
  # every half $WATCHDOG_USEC while the master runs.
  module Systemd
    module_function

    def enabled? = !ENV["NOTIFY_SOCKET"].to_s.empty?

    def notify(state)
      path = ENV["NOTIFY_SOCKET"].to_s
      return false if path.empty?

      path = "\0#{path[1..]}" if path.start_with?("@") # abstract namespace
      sock = Socket.new(:UNIX, :DGRAM, 0)
      sock.connect(Socket.pack_sockaddr_un(path))
      sock.write(state)
      true
    rescue SystemCallError
      false
    ensure
      sock&.close
    end

    # Seconds between WATCHDOG=1 pings, nil when systemd asked for none.
    def watchdog_interval
      usec = ENV["WATCHDOG_USEC"].to_i
      pid = ENV["WATCHDOG_PID"]
      return nil unless usec.positive? && (pid.nil? || pid.to_i == Process.pid)

      usec / 2_000_000.0
    end
  end
end
