# frozen_string_literal: true

require "socket"
require "oribi/process_group"

module Bench
  module Suite
    # A server of the suite (Oribi::ProcessGroup): ready once it answers
    # probe requests, stopped with TERM to its whole group.
    class ProcessGroup < Oribi::ProcessGroup
      BOOT_TIMEOUT = 30
      STOP_TIMEOUT = 10

      # nil when a few requests in a row got a 2xx (with prefork servers the
      # first answer can come while another worker is still booting), else
      # why not.
      def wait_ready(target, request, timeout: BOOT_TIMEOUT)
        deadline = now + timeout
        ok = 0
        while now < deadline
          return "exited with status #{status&.exitstatus.inspect}" if exited?

          ok = self.class.probe(target, request) ? ok + 1 : 0
          return nil if ok >= 4

          sleep(ok.zero? ? 0.1 : 0.02)
        end
        "no answer within #{timeout}s"
      end

      # One request (with Connection: close) read to its end; true on a 2xx.
      def self.probe(target, request)
        sock = target[:unix_path] ? UNIXSocket.new(target[:unix_path]) : TCPSocket.new(target[:host], target[:port])
        sock.write(request)
        reply = +""
        while IO.select([sock], nil, nil, 2)
          chunk = sock.read_nonblock(65_536, exception: false)
          break if chunk.nil?

          reply << chunk unless chunk == :wait_readable
        end
        reply[0, 12].match?(%r{\AHTTP/1\.[01] 2\d\d})
      rescue SystemCallError, IOError
        false
      ensure
        sock&.close
      end

      def stop = super(timeout: STOP_TIMEOUT, group: true)

      # The last lines but warnings (WARN: and the indented lines under it).
      def tail(n = 5) = log.lines.reject { |l| l.start_with?("WARN: ", "      ") }.last(n)
    end
  end
end
