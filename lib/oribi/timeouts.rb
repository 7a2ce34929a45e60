# frozen_string_literal: true

module Oribi
  # When the master kills a worker, or stops the server, for time: three
  # deadlines a worker is killed past, each said by name: request_timeout
  # (Oribi's: one request too long, named so it can be found),
  # worker_timeout (Puma's: the worker has not checked in, however long its
  # requests are: it is hung, stopped, or stuck in C with the GVL held),
  # worker_boot_timeout (not serving yet); and idle_timeout (Puma's): no
  # request taken by any worker for that long, none in the app and no
  # connection active, a graceful stop, which a supervisor's socket
  # activation undoes at the next connection. Read from the scoreboard;
  # the master acts.
  class Timeouts
    KEYS = %i[request_timeout worker_timeout worker_boot_timeout idle_timeout].freeze

    def initialize(config, scoreboard)
      @config = config
      @scoreboard = scoreboard
    end

    # Any of them on: the master looks every second.
    def any? = KEYS.any? { |k| @config[k].positive? }

    # [[child, why], ...]: the workers past a deadline, not killed before.
    def overdue(children, now)
      request, silence, boot = @config[:request_timeout], @config[:worker_timeout], @config[:worker_boot_timeout]
      return [] unless [request, silence, boot].any?(&:positive?)

      children.filter_map do |child|
        next if child.killed

        why = child.booted ? stuck(child, request, silence, now) : slow_boot(child, boot, now)
        [child, why] if why
      end
    end

    # Why the server stops for idle_timeout now, nil: not yet.
    def idle(children, started_at)
      limit = @config[:idle_timeout]
      return nil unless limit.positive?

      rows = children.map { |c| @scoreboard.stats(c.row) }
      return nil if rows.any? { |w| w[:busy] || w[:connections] > w[:idle_connections] }

      last = [started_at.to_f, *rows.filter_map { |w| w[:last_request_at] }].max
      return nil unless Time.now.to_f - last > limit

      "idle_timeout (#{limit} s): no request since #{Time.at(last).utc.strftime('%H:%M:%S')} UTC"
    end

    private

    def stuck(child, request_limit, silence_limit, now)
      stats = @scoreboard.stats(child.row)
      busy = stats[:busy]
      return "stuck #{busy.round(1)} s on #{stats[:request].inspect} (request_timeout #{request_limit} s)" if
        request_limit.positive? && busy && busy > request_limit

      silent = stats[:silent] || (now - child.booted)
      "has not checked in for #{silent.round(1)} s (worker_timeout #{silence_limit} s: hung)" if
        silence_limit.positive? && silent > silence_limit
    end

    def slow_boot(child, limit, now)
      booting = now - child.started
      "has not booted after #{booting.round(1)} s (worker_boot_timeout #{limit} s)" if limit.positive? && booting > limit
    end
  end
end
