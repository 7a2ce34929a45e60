# frozen_string_literal: true

module Oribi
  # The words of a config/puma.rb, so that an app's Puma config runs on
  # Oribi unchanged (docs/MIGRATING.md): each becomes its Oribi option, and
  # the few Oribi has no use for log one line naming the Oribi way and are
  # otherwise ignored. Mixed into Config::DSL, whose @config it sets.
  module PumaWords
    # Puma words with no Oribi counterpart to set, and what to do instead.
    NOTES = {
      queue_requests: "the worker's C loop always reads requests ahead of the app",
      max_fast_inline: "the loop schedules keep-alive and new connections fairly itself",
      wait_for_less_busy_worker: "a worker whose threads are all busy takes no connection",
      fork_worker: "see refork_after (docs/REFORK.md)",
      nakayoshi_fork: "preload_app forks from a warm master",
      lowlevel_error_handler: "a Rack middleware rescues app errors; the server logs its own 5xx",
      state_path: "see `oribi ctl` (docs/CONTROL.md)",
      activate_control_app: "see control and control_token (docs/CONTROL.md)",
      tag: "the process title says oribi and the listeners",
      silence_single_worker_warning: "nothing to silence",
      extra_runtime_dependencies: "nothing to declare",
      prune_bundler: "USR2 restarts from the same command line",
      log_requests: "see access_log",
      quiet: "Oribi logs only what an operator needs",
      on_booted: "see after_worker_boot",
      worker_boot_timeout: "a worker that cannot boot is retried with a back-off",
      worker_check_interval: "the master watches the scoreboard every second",
    }.freeze

    NOTES.each_key do |word|
      define_method(word) do |*args, **_opts, &_blk|
        shown = args.map(&:inspect).join(", ")
        Log.info("#{@path}: #{word}#{" #{shown}" unless shown.empty?} is Puma's: #{NOTES[word]}")
      end
    end

    # tmp_restart: bin/rails restart touches tmp/restart.txt (restart_file).
    def plugin(name)
      return @config[:restart_file] = "tmp/restart.txt" if name.to_s == "tmp_restart"

      Log.info("#{@path}: plugin #{name.inspect} is Puma's: Oribi has no plugins")
    end

    # Puma threads are a pool from min to max; Oribi runs a fixed number.
    def threads(min, max = min)
      min = Integer(min)
      max = Integer(max)
      Log.info("#{@path}: threads #{min}, #{max}: Oribi runs a fixed #{max} per worker") if min != max
      @config[:threads] = max
    end

    def port(number, host = "0.0.0.0")
      bind("tcp://#{host.include?(':') ? "[#{host}]" : host}:#{Integer(number)}")
    end

    def preload_app!(yes = true)
      @config[:preload_app] = yes
    end

    def pidfile(path) = @config[:pid_file] = path
    def early_hints(yes = true) = @config[:early_hints] = yes

    def stdout_redirect(stdout = nil, stderr = nil, _append = true)
      @config[:stdout_path] = stdout if stdout
      @config[:stderr_path] = stderr if stderr
    end

    def persistent_timeout(seconds) = @config[:keepalive_timeout] = seconds
    def first_data_timeout(seconds) = @config[:header_timeout] = seconds
    def worker_shutdown_timeout(seconds) = @config[:shutdown_timeout] = seconds

    # Puma's worker hooks get the worker's index, Oribi's the server too.
    def on_worker_boot(&blk) = @config[:after_fork] = ->(_server, index) { call_hook(blk, index) }
    def on_worker_shutdown(&blk) = @config[:before_worker_exit] = ->(_server, index) { call_hook(blk, index) }

    private

    def call_hook(blk, index) = blk.arity.zero? ? blk.call : blk.call(index)
  end
end
