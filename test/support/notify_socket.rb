# frozen_string_literal: true

require "socket"

# systemd's end of sd_notify(3): a datagram socket the server is pointed
# at with NOTIFY_SOCKET. A thread takes each message as it comes, with
# the monotonic time it came at, so that gaps between them can be read.
class NotifySocket
  attr_reader :path

  def initialize(dir)
    @path = File.join(dir, "notify")
    @sock = Socket.new(:UNIX, :DGRAM, 0)
    @sock.bind(Socket.pack_sockaddr_un(@path))
    @messages = Thread::Queue.new
    @seen = []
    @reader = Thread.new do
      loop do
        text = @sock.recv(4096)
        @messages << [Process.clock_gettime(Process::CLOCK_MONOTONIC), text]
      end
    rescue IOError, SystemCallError
      nil # closed
    end
  end

  # [[time, message], ...] received so far.
  def messages
    @seen << @messages.pop until @messages.empty?
    @seen.dup
  end

  # The first message matching re after the ones already taken by an
  # earlier call, nil when none comes within timeout.
  def next_matching(re, timeout:)
    @taken ||= 0
    found = wait_until(timeout: timeout) do
      messages.drop(@taken).find { |_, text| text.match?(re) }
    end
    @taken = @seen.index(found) + 1 if found
    found&.last
  end

  # The longest time between two messages matching re so far (nil with
  # fewer than two), and every message so far with its time from the
  # first: what a failed watchdog test prints.
  def longest_gap(re)
    times = messages.select { |_, text| text.match?(re) }.map(&:first)
    times.each_cons(2).map { |a, b| b - a }.max
  end

  def timeline
    seen = messages
    seen.map { |t, text| "#{(t - seen[0][0]).round(2)} s #{text.inspect}" }.join("\n")
  end

  def close
    @sock.close
    @reader.join
  end
end
