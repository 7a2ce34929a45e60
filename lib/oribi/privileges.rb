# frozen_string_literal: true

require "etc"

module Oribi
  # The user option: a worker gives up the master's privileges (root,
  # usually) before it runs any app code of its own, as Unicorn's workers
  # do. The master keeps them: it may bind again, and it signals and reaps.
  module Privileges
    module_function

    # "USER" or "USER:GROUP" (the user's own group by default).
    def parse(spec)
      name, group = spec.split(":", 2)
      pw = Etc.getpwnam(name)
      gid = group ? Etc.getgrnam(group).gid : pw.gid
      [pw, gid]
    rescue ArgumentError
      raise Config::Error, "user #{spec.inspect}: no such user or group"
    end

    # Becomes spec's user and group (and its supplementary groups), for
    # good: no way back to root.
    def drop(spec)
      pw, gid = parse(spec)
      return if Process.euid == pw.uid && Process.egid == gid

      Process.initgroups(pw.name, gid)
      Process::GID.change_privilege(gid)
      Process::UID.change_privilege(pw.uid)
    end
  end
end
