# frozen_string_literal: true

require "uri"

module Oribi
  # The words of a config/puma.rb (Puma 6, 7 and 8), so that an app's Puma
  # config runs on Oribi unchanged (docs/MIGRATING.md): each becomes its
  # Oribi option, or, where Oribi has nothing to set, logs one line saying
  # it is ignored and why. None stops the server but a plugin Oribi does
  # not know (plugin). Read only from a Puma config (file?), as
  # Config::PumaDSL, whose @config it sets and whose report (`oribi
  # --check-config`) lists what mapped, what was ignored and what differs.
  module PumaWords
    FILES = "config/puma.rb, config/puma/ENV.rb, or any file named puma*.rb"

    # Whether path is a Puma config: named as Puma names its own, or after it.
    def self.file?(path)
      File.basename(path).start_with?("puma") || File.basename(File.dirname(File.expand_path(path))) == "puma"
    end

    # The files Puma reads when none is named, first found wins.
    def self.default_files(environment) = ["config/puma/#{environment}.rb", "config/puma.rb"]

    # The words a Puma config may use (the __ methods are the reader's).
    def self.words = public_instance_methods(false).reject { |m| m.start_with?("__") }
    def self.word?(name) = words.include?(name.to_sym)

    # Puma words with no Oribi counterpart to set, and why nothing is lost.
    NOTES = {
      queue_requests: "the worker's C loop always reads requests ahead of the app",
      max_fast_inline: "the loop schedules keep-alive and new connections fairly itself",
      wait_for_less_busy_worker: "a worker whose threads are all busy takes no connection",
      fork_worker: "see refork_after (docs/REFORK.md)",
      nakayoshi_fork: "preload_app forks from a warm master",
      state_path: "see `oribi ctl` (docs/CONTROL.md)",
      state_permission: "see `oribi ctl` (docs/CONTROL.md)",
      activate_control_app: "see control and control_token (docs/CONTROL.md)",
      tag: "the process title says oribi and the listeners",
      silence_single_worker_warning: "nothing to silence",
      silence_fork_callback_warning: "nothing to silence",
      extra_runtime_dependencies: "nothing to declare",
      prune_bundler: "USR2 re-executes the command line, Bundler and all, from working_directory",
      log_requests: "see access_log",
      quiet: "Oribi logs only what an operator needs",
      on_booted: "no master hook once booted; see after_worker_boot for each worker",
      after_booted: "no master hook once booted; see after_worker_boot for each worker",
      on_restart: "no hook before a restart: USR2 re-executes, HUP replaces workers",
      before_restart: "no hook before a restart: USR2 re-executes, HUP replaces workers",
      on_stopped: "no hook once stopped: before_worker_exit runs in each worker",
      after_stopped: "no hook once stopped: before_worker_exit runs in each worker",
      after_worker_fork: "no master hook after a fork: after_fork runs in the worker",
      after_worker_shutdown: "no master hook after a worker exits",
      after_worker_boot: "Puma 8's name for after_worker_fork, a master hook after a fork: after_fork runs in the worker",
      _offer_plugins: "Oribi has no plugins to offer the file's words to",
      on_refork: "see refork_after (docs/REFORK.md)",
      before_refork: "see refork_after (docs/REFORK.md)",
      after_refork: "see refork_after (docs/REFORK.md)",
      on_thread_exit: "app threads end with the worker: use before_worker_exit",
      before_thread_exit: "app threads end with the worker: use before_worker_exit",
      drain_on_shutdown: "a TERM always drains (docs/SIGNALS.md)",
      debug: "Oribi logs only what an operator needs",
      shutdown_debug: "a worker stuck past shutdown_timeout is logged with its request",
      worker_culling_strategy: "TTOU stops the highest-numbered worker",
      worker_check_interval: "each worker checks in every second, whatever its requests do",
      bind_to_activated_sockets: "systemd's sockets (LISTEN_FDS) are used whenever they are there",
      io_selector_backend: "the worker's loop is epoll",
      mutate_stdout_and_stderr_to_sync_on_write: "stdout and stderr are always unbuffered",
      raise_exception_on_sigterm: "a TERM drains the requests in flight",
      force_shutdown_after: "see shutdown_timeout",
      log_formatter: "the server's own lines are one line each, to stderr",
      custom_logger: "the server's own lines are one line each, to stderr",
    }.freeze

    NOTES.each_key do |word|
      define_method(word) do |*args, **_opts, &_blk|
        __ignored(word, args, NOTES[word])
      end
    end

    # Words Oribi cannot honour whose absence would change what is served:
    # the server does not start, and the line says what to do instead.
    REFUSED = {
      out_of_band: "Oribi runs no out-of-band hooks: for GC set oob_gc N (a GC when the worker is idle); " \
                   "other work goes in env[\"rack.response_finished\"]",
      app: "Oribi serves the app of a rackup file: move the block to config.ru (`run ...`)",
    }.freeze

    REFUSED.each_key do |word|
      define_method(word) { |*_args, **_opts, &_blk| __refuse(word, REFUSED[word]) }
    end

    # Puma::Const::SUPPORTED_HTTP_METHODS: what Puma answers without a 501
    # unless supported_http_methods says otherwise.
    HTTP_METHODS = %w[HEAD GET POST PUT DELETE OPTIONS TRACE PATCH].freeze

    # tmp_restart: bin/rails restart touches tmp/restart.txt (restart_file).
    # Puma plugins: Oribi has none, but does itself what the usual ones do,
    # or says why nothing is lost without them. A plugin it does not know
    # may do work that would silently stop (run jobs, say): it is an error,
    # never a warning.
    PLUGINS = {
      systemd: "Oribi speaks sd_notify itself (READY, STOPPING, WATCHDOG: docs/DEPLOYMENT.md)",
      heroku: "Oribi reads PORT and WEB_CONCURRENCY itself",
      statsd: "Puma's own metrics: Oribi's are at /metrics (docs/CONTROL.md)",
      yabeda: "Puma's own metrics: Oribi's are at /metrics (docs/CONTROL.md)",
      yabeda_prometheus: "Puma's own metrics: Oribi's are at /metrics (docs/CONTROL.md)",
      barnes: "Puma's own metrics: Oribi's are at /metrics (docs/CONTROL.md)",
      appsignal: "Puma's own metrics: Oribi's are at /metrics (docs/CONTROL.md)",
    }.freeze

    def plugin(name)
      word = "plugin #{name.inspect}"
      case name.to_s
      when "tmp_restart" then __map(word, :restart_file, "tmp/restart.txt")
      when "solid_queue" then __map(word, :solid_queue, true)
      else
        why = PLUGINS[name.to_s.to_sym] or
          raise Config::Error, "#{word}: Oribi has no plugins and does not know what this one does; its work " \
                               "would not happen. If nothing is lost without it, remove the line (docs/MIGRATING.md)"
        __ignored(:plugin, [name], why)
      end
    end

    # Where the file says nothing, what Puma does, wherever Oribi's default
    # differs in what is served: one serving process unless
    # $WEB_CONCURRENCY (Puma's single mode; a worker under a master here,
    # so that Puma's signals and restarts act on it as Puma's do), 5
    # threads unless $PUMA_MAX_THREADS or $MAX_THREADS (or Oribi's own
    # $ORIBI_THREADS), no deadline on a request, and a worker not booted in
    # 60 s killed.
    def __start
      @puma_workers = ENV["WEB_CONCURRENCY"].to_s.strip.empty? ? 0 : @config[:workers]
      __single_mode
      @config[:threads] = __puma_threads if ENV["ORIBI_THREADS"].to_s.empty?
      @config[:request_timeout] = 0
      @config[:worker_boot_timeout] = 60
      @config[:http_methods] = HTTP_METHODS
    end

    # Puma's count, which its single and cluster blocks go by.
    def workers(count)
      super
      @puma_workers = @config[:workers]
      __differs("workers 0", "Puma's single mode: one worker under a master, which acts on Puma's signals") if __single_mode
    end

    def __single_mode = (@config[:workers] = 1 if @puma_workers.zero?)

    def __puma_threads
      max = [ENV.fetch("PUMA_MAX_THREADS", nil), ENV.fetch("MAX_THREADS", nil)].find { |v| !v.to_s.empty? }
      max ? Integer(max, 10) : 5
    end

    # Puma's, not a request timeout: a worker that has not checked in for
    # this long (hung, stopped, stuck in C with the GVL held) is killed; one
    # busy in a long request checks in all the same.
    def worker_timeout(seconds) = __map("worker_timeout", :worker_timeout, seconds)
    def worker_boot_timeout(seconds) = __map("worker_boot_timeout", :worker_boot_timeout, seconds)

    # Puma threads are a pool from min to max; Oribi runs a fixed number.
    def threads(min, max = min)
      min = Integer(min.to_s, 10)
      max = Integer(max.to_s, 10)
      __map("threads #{min}, #{max}", :threads, max)
      __differs("threads #{min}, #{max}", "Oribi runs a fixed #{max} per worker") if min != max
    end

    def port(number, host = nil)
      word = "port #{number}#{", #{host.inspect}" if host}"
      __differs(word, "Puma binds [::] (IPv4 and IPv6), Oribi 0.0.0.0: bind \"tcp://[::]:#{number}\" too for IPv6") unless host || @default_host
      host ||= default_host
      uri = "tcp://#{host.include?(':') ? "[#{host}]" : host}:#{Integer(number.to_s, 10)}"
      __map(word, :binds, uri)
      @binds << uri
    end

    # Puma's URI parameters: backlog and a unix socket's mode have Oribi
    # options. Oribi's own (proxy_protocol) and an ssl:// bind's TLS
    # settings stay on the URI: they are the listener's.
    def bind(uri)
      uri = uri.to_s
      base, query = uri.split("?", 2)
      own = []
      tls = base.start_with?("ssl://") ? Listeners::TLS_PARAMS.keys : []
      URI.decode_www_form(query.to_s).each do |key, value|
        case key
        when "backlog" then __map("bind ...?backlog=#{value}", :backlog, value)
        when "mode" then __map("bind ...?mode=#{value}", :unix_mode, value)
        when *Listeners::PARAMS.keys, *tls then own << [key, value]
        else __ignored(:bind, ["...?#{key}=#{value}"], "a URI parameter Oribi does not take")
        end
      end
      base = "#{base}?#{URI.encode_www_form(own)}" unless own.empty?
      Listeners.split_params(base)
      @binds << base
    rescue ArgumentError => e
      raise Config::Error, e.message
    end

    # Puma's ssl_bind: an ssl:// listener with these TLS settings. PEM text
    # (cert_pem:, key_pem:, often from a secret) stays with the config,
    # never on the URI that logs and `ps` show.
    def ssl_bind(host, port, opts = {})
      host = host.to_s
      base = "ssl://#{host.include?(':') ? "[#{host}]" : host}:#{Integer(port.to_s, 10)}"
      params = []
      pems = {}
      opts.each do |key, value|
        key = key.to_s
        next if value.nil?

        if %w[cert_pem key_pem].include?(key) then pems[key] = value.to_s
        elsif Listeners::TLS_PARAMS.key?(key) then params << [key, value == true || value.is_a?(Hash) ? "true" : value.to_s]
        else __ignored(:ssl_bind, ["#{key}: ..."], "a TLS setting Oribi does not take")
        end
      end
      uri = params.empty? ? base : "#{base}?#{URI.encode_www_form(params)}"
      Listeners.split_params(uri)
      @config.tls_pems[base] = pems unless pems.empty?
      __map("ssl_bind #{host}, #{port}", :binds, uri)
      @binds << uri
    rescue ArgumentError => e
      raise Config::Error, e.message
    end

    def clear_binds! = @binds.clear

    # The host `port` binds when it names none.
    def set_default_host(host) = (@default_host = host.to_s)
    def default_host = @default_host || "0.0.0.0"

    # A Puma option's value as read so far (plugins and files ask), where
    # Oribi has it; else default.
    GET = { workers: :workers, max_threads: :threads, min_threads: :threads, environment: :environment,
            rackup: :rackup, worker_timeout: :worker_timeout, pidfile: :pid_file, persistent_timeout: :keepalive_timeout,
            first_data_timeout: :header_timeout, worker_shutdown_timeout: :shutdown_timeout }.freeze

    def get(key, default = nil) = (name = GET[key.to_sym]) ? @config[name] : default
    def inject(&blk) = instance_eval(&blk)

    # Requests with other methods are answered 501, as Puma does.
    def supported_http_methods(methods)
      __map("supported_http_methods", :http_methods, methods == :any ? [] : Array(methods).map(&:to_s))
    end

    def lowlevel_error_handler(obj = nil, &blk) = __map("lowlevel_error_handler", :lowlevel_error_handler, obj || blk)
    def before_thread_start(&blk) = __hook("before_thread_start", :before_thread_start, blk)
    def on_thread_start(&blk) = __hook("on_thread_start", :before_thread_start, blk)
    def idle_timeout(seconds) = __map("idle_timeout", :idle_timeout, seconds)
    def rack_url_scheme(scheme = nil) = __map("rack_url_scheme", :url_scheme, scheme&.to_s)
    def max_io_threads(count) = __map("max_io_threads", :io_threads, count)

    # Puma 8 runs each request in a fiber of its own, so that fiber locals
    # set by one request are gone for the next; so does Oribi with it.
    def fiber_per_request(yes = true) = __map("fiber_per_request", :fiber_per_request, yes)

    def clean_thread_locals(yes = true) = __map("clean_thread_locals", :fiber_per_request, yes)

    # Puma's forms: :socket (its default), proxy_protocol: :v1, header:
    # NAME, :localhost, or a fixed address. The first three map (strictly:
    # a PROXY header required, a header only from trusted_proxies); the
    # last two would hide the client's address, which REMOTE_ADDR keeps.
    def set_remote_address(val = :socket)
      word = "set_remote_address #{val.is_a?(Hash) ? val.map { |k, v| "#{k}: #{v.inspect}" }.join(', ') : val.inspect}"
      case val
      when :socket then __ignored(:set_remote_address, [val], "REMOTE_ADDR is the socket's peer, as by default")
      when :localhost, String
        __differs(word, "REMOTE_ADDR stays each client's address (Oribi's accept gives it for free): a fixed one " \
                        "would hide every client from the app, the access log and trusted_proxies")
      when Hash then __remote_address_from(word, val)
      else raise Config::Error, "#{word}: Puma takes :socket, :localhost, a String, proxy_protocol: :v1 or header: NAME"
      end
    end

    def preload_app!(yes = true) = __map("preload_app!", :preload_app, yes)
    def pidfile(path) = __map("pidfile", :pid_file, path)
    def early_hints(yes = true) = __map("early_hints", :early_hints, yes)

    def stdout_redirect(stdout = nil, stderr = nil, _append = true)
      __map("stdout_redirect", :stdout_path, stdout) if stdout
      __map("stdout_redirect", :stderr_path, stderr) if stderr
    end

    def directory(dir) = __map("directory", :working_directory, dir)
    def persistent_timeout(seconds) = __map("persistent_timeout", :keepalive_timeout, seconds)
    def first_data_timeout(seconds) = __map("first_data_timeout", :header_timeout, seconds)
    def worker_shutdown_timeout(seconds) = __map("worker_shutdown_timeout", :shutdown_timeout, seconds)
    def max_keep_alive(requests) = __map("max_keep_alive", :keepalive_requests, requests)
    def enable_keep_alives(yes = true) = __map("enable_keep_alives", :keepalive, yes)
    def http_content_length_limit(bytes) = __map("http_content_length_limit", :max_body, bytes || 0)
    def rackup(path) = __map("rackup", :rackup, path)
    def restart_command(cmd)
      __map("restart_command", :restart_command, cmd.to_s)
      __differs("restart_command", "Oribi runs it as it is; Puma appends the server's original arguments")
    end

    # Puma's worker hooks get the worker's index, Oribi's the server too.
    def before_worker_boot(&blk) = __hook("before_worker_boot", :after_fork, blk)
    def before_worker_shutdown(&blk) = __hook("before_worker_shutdown", :before_worker_exit, blk)
    def before_worker_fork(&blk) = __hook("before_worker_fork", :before_fork, blk)
    def on_worker_boot(&blk) = __hook("on_worker_boot", :after_fork, blk)
    def on_worker_shutdown(&blk) = __hook("on_worker_shutdown", :before_worker_exit, blk)
    def on_worker_fork(&blk) = __hook("on_worker_fork", :before_fork, blk)

    # Puma 7's blocks for one mode: run when the workers set so far say so.
    def single(&blk) = (instance_eval(&blk) if @puma_workers.to_i.zero?)
    def cluster(&blk) = (instance_eval(&blk) if @puma_workers.to_i.positive?)

    # Another config file, read as this one.
    def load(path) = instance_eval(File.read(path), path, 1)
    def _load_from(path) = load(path)

    private

    def call_hook(blk, index) = blk.arity.zero? ? blk.call : blk.call(index)

    def __remote_address_from(word, val)
      key, value = val.first
      if val.size == 1 && key == :proxy_protocol && %w[v1 v2].include?(value.to_s)
        __map(word, :proxy_protocol, value.to_s)
        __differs(word, "strict: a connection without the PROXY header is closed unanswered; Puma serves it with the " \
                        "socket's address, so the port serves whoever reaches it directly too (docs/HARDENING.md)")
      elsif val.size == 1 && key == :header
        __map(word, :remote_addr_header, value.to_s)
        __differs(word, "only from a peer in trusted_proxies (loopback unless set), from whom it counts; Puma " \
                        "takes the field from any client, who may write it")
      else
        raise Config::Error, "#{word}: Puma takes proxy_protocol: :v1 (Oribi also :v2) or header: NAME"
      end
    end

    def __hook(word, name, blk)
      __map(word, name, ->(_server, index) { call_hook(blk, index) })
    end

    def __refuse(word, what_to_do)
      raise Config::Error, "#{word}: #{what_to_do} (docs/MIGRATING.md)"
    end
  end
end
