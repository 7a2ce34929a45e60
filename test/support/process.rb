# frozen_string_literal: true

require "socket"
require "tmpdir"
require "oribi/process_group"
require_relative "wait"

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

# Runs a command that should exit by itself, in its own process group:
# → [stdout, stderr, status] (with merge: both in the first, in order).
# Still running after timeout: the group is killed and the test fails
# with what it printed.
def run_command(*cmd, timeout:, env: {}, chdir: Dir.pwd, merge: false)
  Dir.mktmpdir("oribi-cmd") do |dir|
    out = File.join(dir, "out")
    err = merge ? %i[child out] : File.join(dir, "err")
    group = Oribi::ProcessGroup.new(cmd, log: nil, env: env, chdir: chdir, out: out, err: err)
    unless (status = group.reap(timeout: timeout))
      group.stop(:KILL, timeout: 5)
      raise Minitest::Assertion, "#{cmd.join(' ')}: still running after #{timeout} s:\n#{File.read(out)}" \
                                 "#{File.read(err) unless merge}"
    end
    [File.read(out), merge ? "" : File.read(err), status]
  end
end

# The last chars of a log for a failure message: all of it when shorter
# (text[-n..] is nil then, and the message would show nothing).
def log_end(text, chars = 2000) = text.size > chars ? text[-chars..] : text
