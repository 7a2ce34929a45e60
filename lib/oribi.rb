# frozen_string_literal: true

require "oribi/version"
require "oribi/extension"
Oribi::Extension.require!("oribi")

# Oribi: a prefork Rack 3 server whose HTTP engine (parsing, keep-alive,
# slow clients, response writing) runs in a C event loop in each worker.
module Oribi
  autoload :Config, "oribi/config"
  autoload :Options, "oribi/options"
  autoload :CLI, "oribi/cli"
  autoload :CheckConfig, "oribi/check_config"
  autoload :Listeners, "oribi/listeners"
  autoload :Server, "oribi/server"
  autoload :Worker, "oribi/worker"
  autoload :Streams, "oribi/streams"
  autoload :Fibers, "oribi/fibers"
  autoload :Log, "oribi/log"
  autoload :Master, "oribi/master"
  autoload :Signals, "oribi/signals"
  autoload :AccessLog, "oribi/access_log"
  autoload :Systemd, "oribi/systemd"
  autoload :Control, "oribi/control"
  autoload :HotRestart, "oribi/hot_restart"
  autoload :Stats, "oribi/stats"
  autoload :Ctl, "oribi/ctl"
  autoload :Mold, "oribi/mold"
  autoload :Refork, "oribi/refork"
  autoload :RollingRestart, "oribi/rolling_restart"
  autoload :Timeouts, "oribi/timeouts"
  autoload :ShutdownDelay, "oribi/shutdown_delay"
  autoload :WorkerMemory, "oribi/worker_memory"
  autoload :Workers, "oribi/workers"
  autoload :RestartFile, "oribi/restart_file"
  autoload :Certificates, "oribi/certificates"
  autoload :Reexec, "oribi/reexec"
  autoload :SolidQueueProcess, "oribi/solid_queue_process"
  autoload :QueryParser, "oribi/query_parser"
  autoload :Privileges, "oribi/privileges"
  autoload :Cgroup, "oribi/cgroup"
  autoload :Platform, "oribi/platform"

  # A hot restart's new image (USR2) loads its code for as long as the app
  # takes while systemd's watchdog counts: fed from here until the master
  # runs (Systemd.feed_watchdog).
  Systemd.feed_watchdog if Reexec.adopting?

  # Loads every part a worker may use, in the master before it forks: the
  # workers share it copy-on-write, and none reads lib/ again, which a worker
  # running as `user` may not be allowed to (a checkout or gem home in a
  # directory only its owner can enter).
  def self.eager_load!
    constants.each { |name| const_get(name) if autoload?(name) }
    Rack::Utils # what QueryParser.install asks of Rack in the worker
  end
end
