# frozen_string_literal: true

require "socket"

# Whether a process still runs: false once it has exited, whether or not it
# has been reaped yet (a zombie or a dead task does not run). Reads /proc
# once, so a process that is reaped between two checks cannot raise.
def process_alive?(pid)
  return false unless pid

  !File.read("/proc/#{pid}/stat").split(") ", 2)[1].start_with?("Z", "X")
rescue SystemCallError
  false
end

# Distinct sockets a process holds (the loop's copies of the listeners are
# the same sockets; Ruby's own pipes and eventfds are not counted).
def socket_count(pid)
  Dir.children("/proc/#{pid}/fd").filter_map do |fd|
    File.readlink("/proc/#{pid}/fd/#{fd}")
  rescue SystemCallError
    nil
  end.grep(/\Asocket:/).uniq.size
end

# A TCP port on 127.0.0.1 that was free a moment ago: another process may
# take it before the caller binds it (ServerProcess tries again).
def free_port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
