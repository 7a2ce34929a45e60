# frozen_string_literal: true

require "fileutils"
require "open3"
require "securerandom"
require "tmpdir"
require "oribi/process_group"

# Hosts behind a balancer, on one machine: each host a network namespace
# of its own, and the balancer's namespace holding their private network
# (a bridge, the balancer's address on it) where the balancer, the load
# and the scraper run. Nothing is added to the machine's own network, so
# the addresses can be the ones the docs give; the namespaces are named
# after this process and a random suffix, so test processes side by side
# never meet. #close (from an ensure) stops every process started here and
# removes the namespaces.
#
# Commands enter a namespace with nsenter --net, not ip netns exec (or ip
# -n), which also makes a mount namespace and remounts /sys: that fails
# in a chroot (.ci/rubies), whose / is no mount point.
class Fleet
  PREFIX = "oribi-fleet-"

  Host = Struct.new(:name, :address, :ns, :group, :log, :starts)

  attr_reader :dir, :lb, :hosts

  # Why no fleet can be made here, or nil: network namespaces need root
  # (CAP_SYS_ADMIN), ip (iproute2) and nsenter (util-linux).
  def self.unavailable
    return "not root: network namespaces need CAP_SYS_ADMIN" unless Process.uid.zero?

    name = "#{PREFIX}probe-#{Process.pid}-#{SecureRandom.hex(3)}"
    out, status = Open3.capture2e("ip", "netns", "add", name)
    return "ip netns add does not work here: #{out.strip}" unless status.success?

    begin
      out, status = Open3.capture2e(*enter(name), "ip", "link", "set", "lo", "up")
      status.success? ? nil : "nsenter does not work here: #{out.strip}"
    ensure
      Open3.capture2e("ip", "netns", "del", name)
    end
  rescue SystemCallError => e
    "no ip (iproute2) or nsenter (util-linux): #{e.message}"
  end

  # The command prefix that runs a command in namespace ns (in place: the
  # command has nsenter's pid).
  def self.enter(ns) = ["nsenter", "--net=/run/netns/#{ns}"]

  # balancer: its address, prefix: the network's length (24);
  # hosts: { name => address } on that network
  def initialize(balancer:, prefix:, hosts:)
    @id = "#{PREFIX}#{Process.pid}-#{SecureRandom.hex(2)}"
    @dir = Dir.mktmpdir("oribi-fleet")
    @groups = []
    @namespaces = []
    @lb = namespace("lb")
    ip(@lb, "link", "add", "br0", "type", "bridge")
    ip(@lb, "addr", "add", "#{balancer}/#{prefix}", "dev", "br0")
    ip(@lb, "link", "set", "br0", "up")
    @hosts = hosts.each_with_index.to_h do |(name, address), i|
      ns = namespace(name)
      # Made in the namespaces themselves: the machine never sees the pair.
      ip(nil, "link", "add", "name", "v#{i}", "netns", @lb, "type", "veth", "peer", "name", "eth0", "netns", ns)
      ip(@lb, "link", "set", "v#{i}", "master", "br0", "up")
      ip(ns, "addr", "add", "#{address}/#{prefix}", "dev", "eth0")
      ip(ns, "link", "set", "eth0", "up")
      [name, Host.new(name, address, ns, nil, nil, 0)]
    end
  rescue StandardError
    close
    raise
  end

  # argv run in namespace ns, in a process group of its own (its pid is
  # argv's); spawn: out:, err:, ...
  def spawn(ns, argv, log:, env: {}, **spawn)
    group = Oribi::ProcessGroup.new([*Fleet.enter(ns), *argv], log: log, env: env, **spawn)
    @groups << group
    group
  end

  # Starts (again) host name's server; its log is a new file each time.
  def start_host(name, argv, env: {})
    host = @hosts.fetch(name)
    host.starts += 1
    host.log = File.join(@dir, "#{name}.#{host.starts}.log")
    host.group = spawn(host.ns, argv, log: host.log, env: env)
  end

  def host_log(name) = File.read(@hosts.fetch(name).log)

  def close
    @groups.reverse_each { |g| g.stop(:KILL, timeout: 5) }
    @namespaces.each { |ns| Open3.capture2e("ip", "netns", "del", ns) }
    FileUtils.rm_rf(@dir) if @dir
  end

  private

  def namespace(name)
    ns = "#{@id}-#{name}"
    ip(nil, "netns", "add", ns)
    @namespaces << ns
    ip(ns, "link", "set", "lo", "up")
    ns
  end

  # ip ARGS in namespace ns (nil: this process's)
  def ip(ns, *args)
    out, status = Open3.capture2e(*(Fleet.enter(ns) if ns), "ip", *args)
    raise "ip #{args.join(' ')}#{" in #{ns}" if ns}: #{out.strip}" unless status.success?
  end
end
