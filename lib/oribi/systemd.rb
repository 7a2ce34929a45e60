# frozen_string_literal: true

require "socket"

module Oribi
  # sd_notify(3) without libsystemd: datagrams to $NOTIFY_SOCKET saying
  # READY=1 once the workers serve, STOPPING=1 when draining, and WATCHDOG=1
  # every half $WATCHDOG_USEC: from the master's loop, and from a thread
  # while a hot restart's new image loads its code (systemd's watchdog
  # keeps counting through a reload).
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

    # Pings now and every watchdog_interval from a thread, until
    # stop_feeding: for the new image of a hot restart, from the moment
    # Oribi is required (by exe/oribi; under `rails server` when Rails
    # looks up its Rack handler, before the app initializes) until the
    # master's loop runs. A load that never ends is not caught by the
    # watchdog then; the previous workers serve meanwhile. And for a
    # single process (workers 0), from READY on: the thread needs the GVL,
    # so an app that holds it stuck stops the pings.
    def feed_watchdog
      interval = watchdog_interval or return
      notify("WATCHDOG=1")
      @feeder = Thread.new do
        loop do
          sleep interval
          notify("WATCHDOG=1")
        end
      end
    end

    def stop_feeding
      @feeder&.kill
      @feeder = nil
    end
  end
end
