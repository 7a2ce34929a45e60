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

# The distinct sockets a process holds, as /proc names them
# ("socket:[INODE]"): the loop's copies of the listeners are the same
# sockets; Ruby's own pipes and eventfds are not sockets.
def socket_names(pid)
  Dir.children("/proc/#{pid}/fd").filter_map do |fd|
    File.readlink("/proc/#{pid}/fd/#{fd}")
  rescue SystemCallError
    nil
  end.grep(/\Asocket:/).uniq
rescue SystemCallError
  []
end

def socket_count(pid) = socket_names(pid).size

# A recycled worker (pid old) drains, held by stalled, a client that reads
# nothing of its response: a new request is answered at once by its
# replacement, the old one lives until stalled closes, then exits.
def assert_replaced_while_it_drains(srv, old, stalled)
  t = now
  # The master logs the recycling, then signals the worker: a request sent
  # at once may still be the old worker's (it listens until the signal
  # comes), and is answered by it. The next ones are the replacement's.
  answers = []
  until answers.last && answers.last != old
    res = begin
      HTTPClient.request(srv.tcp, "/", headers: { "Connection" => "close" })
    rescue Timeout::Error
      nil
    end
    refute_nil res, "no answer in #{(now - t).round(1)} s while the recycled worker drained:\n#{srv.log}"
    assert_equal 200, res.status
    answers << res.body[/pid (\d+)/, 1].to_i
    assert_operator answers.size, :<=, 5, "answered by the recycled worker #{answers.size} times"
  end
  waited = now - t
  assert_operator waited, :<, 10 # the outage this guards against was 26.7 s; a loaded machine took 5
  assert process_alive?(old), "the recycled worker still drains (the client reads nothing)"
  stalled.close
  assert wait_until(timeout: 10) { !process_alive?(old) }, "the recycled worker exits once its client is gone"
end

# Whether a process of group (an Oribi::ProcessGroup) holds a socket
# listening on the TCP port, on any address, IPv4 or IPv6 (a framework may
# bind 0.0.0.0 or [::]). Such a socket accepts, so this is a readiness
# check that a connect alone is not: two tests can be handed the same free
# port, and then the other's server accepts there while this one failed
# to bind.
def listens_on?(group, port)
  suffix = format(":%04X", port)
  listening = %w[/proc/net/tcp /proc/net/tcp6].flat_map do |table|
    File.foreach(table).filter_map do |line|
      f = line.split
      "socket:[#{f[9]}]" if f[1].end_with?(suffix) && f[3] == "0A" # 0A: LISTEN
    end
  end
  group.members.keys.any? { |pid| socket_names(pid).intersect?(listening) }
end

# The first port of the range the kernel hands out for outbound
# connections and for port 0.
EPHEMERAL_LOW = begin
  File.read("/proc/sys/net/ipv4/ip_local_port_range").split.first.to_i
rescue SystemCallError
  32_768
end

# A TCP port on 127.0.0.1 that was free a moment ago, from below the
# ephemeral range: a port there (what port 0 gives) can be taken meanwhile
# as the source port of any connection the load tests make, thousands a
# second, and the server then fails to bind. Another test may still pick
# the same port (ServerProcess tries again).
def free_port
  return TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] } if EPHEMERAL_LOW < 13_024 # no room below it

  100.times do
    port = rand((EPHEMERAL_LOW - 12_000)...EPHEMERAL_LOW)
    return TCPServer.open("127.0.0.1", port) { port }
  rescue Errno::EADDRINUSE, Errno::EACCES
    next
  end
  raise "no free port below #{EPHEMERAL_LOW}"
end

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
