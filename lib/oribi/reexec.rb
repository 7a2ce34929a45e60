# frozen_string_literal: true

module Oribi
  # The hot restart (USR2) as a re-exec in place: the master execs the
  # command line it was started with, from working_directory as named (a
  # switched `current` symlink gives the new release), keeping its pid, its
  # listening sockets and its workers. The workers of the old code go on
  # serving while the new code loads; once every new worker serves they
  # drain, leaving the backlog to the new ones. A supervisor watching the
  # pid (systemd's MAINPID, runit, foreman, a container's PID 1) sees it
  # never exit. If the new code cannot boot, the old workers go on serving
  # and the master says so; the next USR2 tries again.
  #
  # This module carries that state across exec(2) in the environment.
  module Reexec
    ADOPT = "ORIBI_ADOPT"            # "pid:index,..." the workers of the old code
    LIFELINE = "ORIBI_LIFELINE_FD"   # the old workers' lifeline (Worker.lifeline): kept open until they exit
    SUPERVISOR = "ORIBI_SUPERVISOR"  # start_server or systemd: the listeners stay theirs
    CONTROL = "ORIBI_CONTROL_FD"
    STAND_IN = "ORIBI_CONTROL_STAND_IN" # the pid answering the control endpoint meanwhile (HotRestart::StandIn)
    SOLID_QUEUE = "ORIBI_SOLID_QUEUE_PID" # the previous image's Solid Queue supervisor (SolidQueueProcess)

    module_function

    # The environment changes for the new image: every path into the
    # directory the server booted in, as resolved then (releases/1), now
    # under the working directory as named (current/): BUNDLE_GEMFILE,
    # which `bundle exec` set from the resolved directory, and the like, so
    # that a deleted old release is never read again.
    def repointed(env, from:, to:)
      return {} if from == to

      env.each_with_object({}) do |(name, value), changes|
        parts = value.split(":", -1)
        moved = parts.map { |p| repoint(p, from: from, to: to) }
        changes[name] = moved.join(":") if moved != parts
      end
    end

    def repoint(path, from:, to:)
      path == from || path.start_with?("#{from}/") ? to + path.delete_prefix(from) : path
    end

    # pid => index of the workers the previous image left serving; taken
    # from the environment once.
    def adopted(env = ENV)
      list = env.delete(ADOPT).to_s
      list.split(",").to_h { |e| e.split(":").map { |n| Integer(n, 10) } }
    end

    # The write end of the old workers' lifeline, held until they are gone.
    def lifeline(env = ENV)
      fd = env.delete(LIFELINE) or return nil
      IO.for_fd(Integer(fd, 10), autoclose: true).tap { |io| io.close_on_exec = true }
    rescue ArgumentError, SystemCallError
      nil
    end

    def adopting?(env = ENV) = env.key?(ADOPT)

    # The pid of the Solid Queue supervisor the previous image left running,
    # taken from the environment once; nil without one.
    def solid_queue(env = ENV)
      pid = env.delete(SOLID_QUEUE) or return nil
      Integer(pid, 10, exception: false)
    end

    # The pid of the control endpoint's stand-in, taken from the
    # environment once; nil without one.
    def stand_in(env = ENV)
      pid = env.delete(STAND_IN) or return nil
      Integer(pid, 10, exception: false)
    end

    # The environment and fds exec needs to hand over listeners, workers,
    # their lifeline and the control endpoint.
    def handover(listeners:, workers:, lifeline:, control:, solid_queue: nil, stand_in: nil)
      fds = listeners.all.to_h { |l| [l.fileno, l.fileno] }
      fds[lifeline.fileno] = lifeline.fileno
      env = { "ORIBI_INHERIT" => listeners.all.map { |l| "#{l.uri.split(' ').first}=#{l.fileno}" }.join(";"),
              ADOPT => workers.map { |pid, index| "#{pid}:#{index}" }.join(","),
              LIFELINE => lifeline.fileno.to_s,
              SUPERVISOR => listeners.supervisor&.to_s,
              CONTROL => nil,
              SOLID_QUEUE => solid_queue&.to_s,
              STAND_IN => stand_in&.to_s,
              "SERVER_STARTER_PORT" => nil, "LISTEN_FDS" => nil, "LISTEN_PID" => nil, "LISTEN_FDNAMES" => nil }
      if control && !control.closed?
        fds[control.fileno] = control.fileno
        env[CONTROL] = control.fileno.to_s
      end
      [env, fds]
    end
  end
end
