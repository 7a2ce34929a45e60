# frozen_string_literal: true

require "socket"
require "tmpdir"
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

# The exit status of a child once it ends, or nil while it still runs after
# timeout seconds (it is not signalled, and not reaped then). Polls
# waitpid: no Timeout thread interrupting a blocking wait.
def reap(pid, timeout:)
  status = nil
  wait_until(timeout: timeout, interval: 0.02) { status = Process.wait2(pid, Process::WNOHANG)&.last }
  status
rescue Errno::ECHILD
  nil # reaped already
end

# Signals a child that leads its own process group and reaps it; past
# timeout, the whole group is killed. Whatever is left of its group
# (workers that outlived it) is killed too. Its status, or nil when it was
# reaped already.
def stop_process(pid, timeout:, signal: :TERM)
  begin
    Process.kill(signal, pid)
  rescue Errno::ESRCH
    nil # gone already: collect its status
  end
  reap(pid, timeout: timeout) || begin
    kill_group(pid)
    Process.wait2(pid).last
  rescue Errno::ECHILD
    nil
  end
ensure
  kill_group(pid)
end

# KILLs a process group (what a child started with pgroup: true leaves).
def kill_group(pid)
  Process.kill(:KILL, -pid) if pid
rescue Errno::ESRCH, Errno::EPERM
  nil
end

# Runs a command that should exit by itself, in its own process group:
# → [stdout, stderr, status] (with merge: both in the first, in order).
# Still running after timeout: the group is killed and the test fails
# with what it printed.
def run_command(*cmd, timeout:, env: {}, chdir: Dir.pwd, merge: false)
  Dir.mktmpdir("oribi-cmd") do |dir|
    out = File.join(dir, "out")
    err = merge ? out : File.join(dir, "err")
    pid = Process.spawn(env, *cmd, out: out, err: [err, "a"], pgroup: true, chdir: chdir)
    unless (status = reap(pid, timeout: timeout))
      stop_process(pid, signal: :KILL, timeout: 5)
      raise Minitest::Assertion, "#{cmd.join(' ')}: still running after #{timeout} s:\n#{File.read(out)}" \
                                 "#{File.read(err) unless merge}"
    end
    [File.read(out), merge ? "" : File.read(err), status]
  end
end

# The last chars of a log for a failure message: all of it when shorter
# (text[-n..] is nil then, and the message would show nothing).
def log_end(text, chars = 2000) = text.size > chars ? text[-chars..] : text
