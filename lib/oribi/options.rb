# frozen_string_literal: true

require "etc"
require "ipaddr"
require "optparse"
require "oribi" # the C limits: Oribi::Parser::DEFAULT_*, Engine::BOUNDS
require "oribi/cgroup"

module Oribi
  # Every server option, written once: its name (the config file's method,
  # Config's key), its command-line flags, the type that reads it from text,
  # its default, the check its value must pass and a line of help. From this
  # table come Config and its DSL, the command line and `oribi --help`, the
  # Rack handler's -O options, and the values the C engine runs with (it has
  # no defaults of its own). docs/CONFIGURATION.md says more about each;
  # test/config_docs_test.rb keeps it in step with the table.
  module Options
    # The check a value must pass, and what the error says was expected.
    Check = Struct.new(:hint, :test) do
      def call(value) = test.call(value)
    end

    def self.check(hint = nil, &test) = Check.new(hint, test)

    def self.int(range, hint = nil)
      hint ||= range.end ? "an integer #{range}" : "an integer >= #{range.begin}"
      check(hint) { |v| v.is_a?(Integer) && range.cover?(v) }
    end

    # An option the C engine reads as an integer: its bounds are the
    # engine's (Engine::BOUNDS), written once there.
    def self.bounded(name, hint = nil) = int(Engine::BOUNDS.fetch(name), hint)

    POSITIVE = check("seconds > 0") { |v| v.is_a?(Numeric) && v.positive? }
    STRING = check("a non-empty string") { |v| v.is_a?(String) && !v.empty? }
    OPTIONAL_STRING = check("nil or a non-empty string") { |v| v.nil? || STRING.call(v) }

    def self.zero_is(meaning) = check("seconds, 0 = #{meaning}") { |v| v.is_a?(Numeric) && v >= 0 }

    # How a value is read: from a flag's argument (pattern: OptionParser's
    # conversion, then cli), from a Rack handler option (text: the String
    # of `-O Name=text`, or what Ruby passed; a String that does not parse
    # is kept, for the check to report), and shown. A repeatable flag adds
    # to the list of the ones before it.
    Type = Struct.new(:arg, :pattern, :cli, :text, :check, :show, :repeat, keyword_init: true) do
      def parse_cli(value) = cli ? cli.call(value) : value
      def parse_text(value) = text ? text.call(value) : value
    end

    # A text reader that leaves values other than Strings as they are.
    def self.from_string(&read) = ->(v) { v.is_a?(String) ? read.call(v) : v }

    def self.bool(text)
      case text
      when /\A(?:true|yes|on)\z/i then true
      when /\A(?:false|no|off)\z/i then false
      else text
      end
    end

    def self.counts(list)
      list.map { |n| Integer(n, 10) }
    rescue ArgumentError
      raise OptionParser::InvalidArgument, "#{list.join(',')} (expected request counts)"
    end

    # "100,1000" from rackup -O, or a lone count from Ruby.
    def self.counts_from_text(value)
      return value if value.is_a?(Array)

      value.to_s.split(",").map { |n| Integer(n.strip, 10, exception: false) || n }
    end

    OCTAL = /\A0?[0-7]{1,3}\z/

    STR = Type.new(arg: "STRING", check: STRING)
    OPT_STR = Type.new(arg: "STRING", check: OPTIONAL_STRING)
    PATH = Type.new(arg: "PATH", check: OPTIONAL_STRING)
    DIR = Type.new(arg: "DIR", check: STRING)
    INT = Type.new(arg: "N", pattern: Integer, text: from_string { |s| Integer(s, 10, exception: false) || s })
    SECONDS = Type.new(arg: "SEC", pattern: Float, text: from_string { |s| Float(s, exception: false) || s })
    BOOL = Type.new(arg: "true|false", text: from_string(&method(:bool)), check: check("true or false") { |v| [true, false].include?(v) })
    MODE = Type.new(arg: "MODE", pattern: OCTAL, cli: ->(s) { s.to_i(8) },
                    text: from_string { |s| s.match?(OCTAL) ? s.to_i(8) : s }, show: ->(v) { format("%04o", v) },
                    check: check("nil or a mode like 0o660") { |v| v.nil? || (v.is_a?(Integer) && v.between?(0, 0o777)) })
    # Each -b adds a listener, as `bind` does in the config file.
    URIS = Type.new(arg: "URI", cli: ->(s) { [s] }, repeat: true,
                    check: check("a list of URIs") { |v| v.is_a?(Array) && !v.empty? && v.all?(String) })
    COUNTS = Type.new(arg: "N,N", pattern: Array, cli: method(:counts),
                      text: method(:counts_from_text),
                      show: ->(v) { v.empty? ? "off" : v.join(",") },
                      check: check("a list of request counts, [] = off") { |v|
                        v.is_a?(Array) && v.all? { |n| n.is_a?(Integer) && n.positive? }
                      })
    # --access-log alone logs to stderr ("-").
    LOG = Type.new(arg: "PATH", cli: ->(s) { s || "-" }, check: OPTIONAL_STRING)

    def self.address?(text)
      IPAddr.new(text)
      true
    rescue IPAddr::Error
      false
    end

    ADDRESSES = Type.new(arg: "ADDR,ADDR", pattern: Array,
                         text: from_string { |s| s.split(",").map(&:strip).reject(&:empty?) },
                         show: ->(v) { v.empty? ? "none" : v.join(",") },
                         check: check("a list of up to #{Engine::MAX_TRUSTED} addresses or CIDR ranges") { |v|
                           v.is_a?(Array) && v.size <= Engine::MAX_TRUSTED && v.all? { |a| a.is_a?(String) && address?(a) }
                         })
    HOOK = Type.new(arg: "PROC", check: check("a block") { |v| v.nil? || v.respond_to?(:call) })
    # A token (RFC 9110): a method, a field name, as the parser takes them.
    TOKEN = /\A[!#$%&'*+.^_`|~0-9A-Za-z-]+\z/
    # Request methods: tokens.
    METHODS = Type.new(arg: "M,M", pattern: Array,
                       text: from_string { |s| s.split(",").map(&:strip).reject(&:empty?) },
                       show: ->(v) { v.empty? ? "any" : v.join(",") },
                       check: check("a list of method names, [] = any") { |v|
                         v.is_a?(Array) && v.all? { |m| m.is_a?(String) && m.match?(TOKEN) }
                       })

    def self.one_of(*names)
      hint = "#{names[0..-2].join(', ')} or #{names[-1]}"
      Type.new(arg: names.join("|"), pattern: names, check: check(hint) { |v| names.include?(v) })
    end

    # A default worked out at start (from the environment, the machine),
    # shown by how it is found rather than by this machine's value.
    Computed = Struct.new(:text, :block) do
      def call = block.call
      def to_s = text
    end

    def self.computed(text, &block) = Computed.new(text, block)

    # nil, shown as what nil means for this option.
    def self.unset(text) = computed(text) { nil }

    # One worker per CPU the process may use: its cgroup's quota and cpuset
    # (lib/oribi/cgroup.rb), else the host's.
    CPUS = computed("one per usable CPU") { Cgroup.current.cpus.count }

    # $PWD as the shell has it (a symlink such as Capistrano's current/ kept
    # as such) when it is the current directory, else the real path.
    HERE = computed("$PWD when it is the current directory, else the current directory") do
      pwd = ENV.fetch("PWD", nil)
      same = pwd && File.directory?(pwd) && File.stat(pwd).then { |a| File.stat(".").then { |b| [a.dev, a.ino] == [b.dev, b.ino] } }
      same ? pwd : Dir.pwd
    end

    def self.show(value)
      case value
      when true then "on"
      when false then "off"
      when nil then "none"
      when Array then value.join(", ")
      else value.to_s
      end
    end

    # $VAR when set, else fallback; wrap turns either into the value.
    def self.env(var, fallback, read: ->(name) { ENV.fetch(name, nil) }, &wrap)
      wrap ||= :itself.to_proc
      text = "#{show(wrap.call("$#{var}"))}, else #{show(fallback.is_a?(Computed) ? fallback : wrap.call(fallback))}"
      computed(text) do
        raw = read.call(var)
        raw = fallback.respond_to?(:call) ? fallback.call : fallback if raw.nil?
        wrap.call(raw)
      end
    end

    def self.env_int(var, fallback, &wrap) = env(var, fallback, read: ->(name) { Config.env_int(name, nil) }, &wrap)

    # What Rails' config/puma.rb gives Puma: $RAILS_MAX_THREADS, else 3. Under
    # `rails server` a Rails app gets that; elsewhere one thread.
    RAILS_SERVER_THREADS = computed("3 under rails server, else 1") { defined?(::Rails::Server) ? 3 : 1 }
    RAILS_THREADS = env_int("RAILS_MAX_THREADS", RAILS_SERVER_THREADS)

    # As Puma reads it.
    APP_ENV = env("APP_ENV", env("RACK_ENV", env("RAILS_ENV", "development")))

    PORT = 9292 # rackup's too
    PORT_BIND = env_int("PORT", PORT) { |port| ["tcp://0.0.0.0:#{port}"] }

    # One option, the server's and the tools' (oribi-bench's ToolOptions
    # tables hold these too); flags is nil for those the config file alone
    # sets. set stores a flag's value where values[name] = value would not
    # do, as (values, value): a tool's flag that sets another option (its
    # --json sets the format); the server's options have none.
    Option = Struct.new(:name, :flags, :type, :default, :check, :help, :set) do
      def value = default.respond_to?(:call) ? default.call : default
      def valid?(value) = (check || type.check).call(value)
      def hint = (check || type.check).hint
      def hook? = type == HOOK
      def bool? = type == BOOL

      # The default as --help and docs/CONFIGURATION.md show it.
      def shown
        return default.to_s if default.is_a?(Computed)

        type.show && !default.nil? ? type.show.call(default) : Options.show(default)
      end

      def help_line = "#{help} (default #{shown})"

      # How a doc's option table names it: "-c, --connections N".
      def synopsis = flags.join(", ")

      # The name a placeholder gives the value: "N" in --workers N.
      def arg
        return type.arg if bool? || flags.nil?

        flags.last[/ \[?([^\]]+)\]?\z/, 1] || type.arg
      end
    end

    def self.opt(*fields) = Option.new(*fields)

    # What the engine's C side and the kernel hold these in: each bound is
    # written here once, where --check-config reads it (engine.c asserts
    # the same ranges).
    UINT32_MAX = (2**32) - 1
    INT32_MAX = (2**31) - 1
    INT64_MAX = (2**63) - 1
    GC_EVERY = bounded(:oob_gc, "requests between GCs, 0 = off")
    CONTROL_URI = check("nil, tcp://HOST:PORT or unix:///PATH") do |v|
      v.nil? || (v.is_a?(String) && v.match?(%r{\A(unix:///.+|tcp://.+:\d+)\z}))
    end
    FORMATS = one_of("combined", "ltsv", "json")
    PROXY_PROTOCOL = one_of("off", *Parser::PROXY_PROTOCOLS.keys)
    FIELD_NAME = check("nil or a header field name") { |v| v.nil? || (v.is_a?(String) && v.match?(TOKEN)) }
    LOG_FORMATS = Type.new(arg: "text|json|ltsv", pattern: %w[text json ltsv],
                           check: check("text, json or ltsv") { |v| v.nil? || %w[text json ltsv].include?(v) })
    MEMORY = check("bytes, 0 = off") { |v| v.nil? || (v.is_a?(Integer) && v >= 0) }

    # In --help's order. Durations in seconds, sizes in bytes.
    ALL = [
      #   name                 flags                          type     default                              check                help
      opt(:config_file,        ["-C", "--config FILE"],       PATH,    unset("config/oribi.rb, else config/puma/ENV.rb, else config/puma.rb, the first present"), nil,                 "config file"),
      opt(:binds,              ["-b", "--bind URI"],          URIS,    PORT_BIND,                           nil,                 "tcp://HOST:PORT or unix:///PATH; repeatable"),
      opt(:workers,            ["-w", "--workers N"],         INT,     env_int("WEB_CONCURRENCY", CPUS),    int(0..),            "worker processes; 0 = serve from this process"),
      opt(:threads,            ["-t", "--threads N"],         INT,     env_int("ORIBI_THREADS", RAILS_THREADS), bounded(:threads),   "threads per worker"),
      opt(:io_threads,         ["--io-threads N"],            INT,     0,                                   bounded(:io_threads), "more threads for requests the app marks as waiting on IO; 0 = off"),
      opt(:fibers,             ["--fibers N"],                INT,     0,                                   bounded(:fibers), "run up to N requests at once as fibers under async's scheduler (threads unused); 0 = off"),
      opt(:fiber_per_request,  ["--[no-]fiber-per-request"],  BOOL,    false,                               nil,                 "each request in a fiber of its own on its thread (fiber locals end with it), as Puma's"),
      opt(:max_streams,        ["--max-streams N"],           INT,     512,                                 bounded(:max_streams), "responses whose body streams a worker carries beyond its threads; 0 = none"),
      opt(:environment,        ["-E", "--env ENV"],           STR,     APP_ENV,                             nil,                 "RACK_ENV for the app"),
      opt(:preload_app,        ["--[no-]preload"],            BOOL,    true,                                nil,                 "load the app in the master before forking"),
      opt(:solid_queue,        ["--[no-]solid-queue"],        BOOL,    false,                               nil,                 "run Solid Queue's supervisor (Rails jobs) beside the workers"),
      opt(:keepalive,          ["--[no-]keepalive"],          BOOL,    true,                                nil,                 "keep HTTP/1.1 connections open between requests"),
      opt(:keepalive_timeout,  ["--keepalive-timeout SEC"],   SECONDS, 20,                                  POSITIVE,            "close idle keep-alive connections after SEC"),
      opt(:keepalive_requests, ["--keepalive-requests N"],    INT,     1000,                                bounded(:keepalive_requests),  "requests per connection before close; 0 = no limit"),
      opt(:header_timeout,     ["--header-timeout SEC"],      SECONDS, 30,                                  POSITIVE,            "408 when a request head takes longer"),
      opt(:body_timeout,       ["--body-timeout SEC"],        SECONDS, 30,                                  POSITIVE,            "408 when a body gains less than 8 KiB in SEC"),
      opt(:write_timeout,      ["--write-timeout SEC"],       SECONDS, 30,                                  POSITIVE,            "drop a client that reads nothing for SEC"),
      opt(:min_body_rate,      ["--min-body-rate BYTES"],     INT,     1024,                                bounded(:min_body_rate),  "408 for a body slower than BYTES per second after 5 s; 0 = no minimum"),
      opt(:max_body,           ["--max-body BYTES"],          INT,     100 * 1024 * 1024,                   bounded(:max_body),   "413 for larger request bodies; 0 = no limit"),
      opt(:body_buffer,        ["--body-buffer BYTES"],       INT,     112 * 1024,                          bounded(:body_buffer),   "bodies larger than this go to a tmpfile"),
      opt(:max_request_line,   ["--max-request-line BYTES"],  INT,     Parser::DEFAULT_MAX_REQUEST_LINE,    bounded(:max_request_line),  "414 for longer request lines"),
      opt(:max_header_bytes,   ["--max-header-bytes BYTES"],  INT,     Parser::DEFAULT_MAX_HEADER_BYTES,    bounded(:max_header_bytes),  "431 for a larger header section"),
      opt(:max_headers,        ["--max-headers N"],           INT,     Parser::DEFAULT_MAX_HEADERS,         bounded(:max_headers),   "431 for more header fields"),
      opt(:max_connections,    ["--max-connections N"],       INT,     1024,                                bounded(:max_connections),  "open connections per worker"),
      opt(:busy_poll,          ["--busy-poll USEC"],          INT,     0,                                   bounded(:busy_poll),        "poll up to USEC µs before sleeping while events come that fast; 0 = off"),
      opt(:early_hints,        ["--[no-]early-hints"],        BOOL,    false,                               nil,                 "offer env[\"rack.early_hints\"] (103s); nginx before 1.29 takes a 103 for the answer"),
      opt(:max_write_backlog,  ["--max-write-backlog BYTES"], INT,     64 * 1024 * 1024,                    bounded(:max_write_backlog),   "response bytes a worker keeps for slow clients; 0 = no cap"),
      opt(:max_response_spool, ["--max-response-spool BYTES"], INT,    1024 * 1024 * 1024,                  bounded(:max_response_spool),   "bytes of one response spooled to tmpdir for a slow client; 0 = never"),
      opt(:max_worker_spool,   ["--max-worker-spool BYTES"],  INT,     256 * 1024 * 1024,                   bounded(:max_worker_spool),   "bytes of all responses one worker keeps spooled at once; 0 = no cap"),
      opt(:max_requests,       ["--max-requests N"],          INT,     0,                                   int(0..),            "recycle a worker after N requests; 0 = never"),
      opt(:max_worker_memory,  ["--max-worker-memory BYTES"], INT,    unset("memory.max ÷ workers when the cgroup limits memory, else off"), MEMORY, "recycle a worker whose PSS (else RSS) outgrows BYTES; 0 = off"),
      opt(:min_requests,       ["--min-requests N"],          INT,     0,                                   int(0..),            "with max_requests: draw each worker's limit from N..max"),
      opt(:backlog,            ["--backlog N"],               INT,     1024,                                int(1..INT32_MAX),   "listen(2) backlog"),
      opt(:reuse_port,         ["--[no-]reuse-port"],         BOOL,    false,                               nil,                 "SO_REUSEPORT on TCP listeners"),
      opt(:unix_mode,          ["--unix-mode MODE"],          MODE,    0o660,                               nil,                 "permissions of unix sockets, octal"),
      opt(:proxy_protocol,     ["--proxy-protocol VERSION"],  PROXY_PROTOCOL, "off",                        nil,                 "connections must open with this PROXY protocol header, on listeners whose URI does not say; any = v1 or v2"),
      opt(:umask,              ["--umask MODE"],              MODE,    unset("inherited"),                  nil,                 "process umask, octal"),
      opt(:worker_timeout,     ["--worker-timeout SEC"],      SECONDS, 60,                                  zero_is("never"),    "kill a worker that has not checked in for SEC (hung, as Puma's); 0 = never"),
      opt(:worker_boot_timeout, ["--worker-boot-timeout SEC"], SECONDS, 0,                                 zero_is("never"),    "kill a worker not booted after SEC (a Puma config: 60); 0 = never"),
      opt(:request_timeout,    ["--request-timeout SEC"],     SECONDS, 60,                                  zero_is("never"),    "kill a worker busy in one request longer (a Puma config: off); 0 = never"),
      opt(:soft_timeout,       ["--soft-timeout SEC"],        SECONDS, 0,                                   zero_is("off"),      "log a request running longer, with its backtrace; 0 = off"),
      opt(:soft_timeout_raise, ["--[no-]soft-timeout-raise"], BOOL,    false,                               nil,                 "also raise Oribi::RequestTimeout in the app"),
      opt(:rolling_interval,   ["--rolling-interval SEC"],    SECONDS, 1,                                   zero_is("no pause"), "pause between workers in a rolling restart"),
      opt(:refork_after,       ["--refork-after N,N"],        COUNTS,  [].freeze,                           nil,                 "refork workers from a warm one after N requests"),
      opt(:idle_timeout,       ["--idle-timeout SEC"],        SECONDS, 0,                                   zero_is("never"),    "stop gracefully after SEC without a request; 0 = never"),
      opt(:http_methods,       ["--http-methods M,M"],        METHODS, [].freeze,                           nil,                 "answer 501 to other request methods; [] = any (a Puma config: Puma's 8)"),
      opt(:url_scheme,         ["--url-scheme SCHEME"],       OPT_STR, unset("http"),                       nil,                 "env[\"rack.url_scheme\"] for every request"),
      opt(:oob_gc,             ["--oob-gc N"],                INT,     0,                                   GC_EVERY,            "run GC between requests every N requests; 0 = off"),
      opt(:fast_query_parser,  ["--[no-]fast-query-parser"],  BOOL,    true,                                nil,                 "Rack's query and form parsing, in C (Oribi::QueryParser)"),
      opt(:shutdown_timeout,   ["--shutdown-timeout SEC"],    SECONDS, 25,                                  POSITIVE,            "kill workers still busy this long after TERM"),
      opt(:shutdown_delay,     ["--shutdown-delay SEC"],      SECONDS, 0,                                   zero_is("off"),      "after TERM, readiness 503 and serve SEC more before draining"),
      opt(:access_log,         ["--access-log [FILE]"],       LOG,     unset("off"),                        nil,                 "log each request to FILE, stderr without one"),
      opt(:access_log_format,  ["--access-log-format FMT"],   FORMATS, "combined",                          nil,                 "access log format: combined, ltsv or json"),
      opt(:log_format,         ["--log-format FMT"],          LOG_FORMATS, unset("access_log_format when json or ltsv, else text"), nil, "error and lifecycle lines: text, json or ltsv"),
      opt(:trusted_proxies,    ["--trusted-proxies ADDR,ADDR"], ADDRESSES, %w[127.0.0.0/8 ::1].freeze,    nil,                 "peers whose X-Forwarded-For (access log) and X-Request-Start (queue time) count"),
      opt(:remote_addr_header, ["--remote-addr-header NAME"], OPT_STR, unset("off"),                    FIELD_NAME,          "REMOTE_ADDR from this request field (its first address) when the peer is a trusted proxy"),
      opt(:stdout_path,        ["--stdout FILE"],             PATH,    unset("inherited"),                  nil,                 "append stdout to FILE, reopened on USR1"),
      opt(:stderr_path,        ["--stderr FILE"],             PATH,    unset("inherited"),                  nil,                 "append stderr to FILE, reopened on USR1"),
      opt(:pid_file,           ["--pid FILE"],                PATH,    nil,                                 nil,                 "write the server's pid to FILE"),
      opt(:user,               ["--user USER[:GROUP]"],       OPT_STR, unset("the master's"),               nil,                 "workers run as this user (and group), the master as it was started"),
      opt(:restart_file,       ["--restart-file FILE"],       PATH,    nil,                                 nil,                 "restart with the app's new code when FILE is touched"),
      opt(:restart_command,    ["--restart-command CMD"],     OPT_STR, unset("the command line it was started with"), nil,    "what a hot restart (USR2, restart_file) runs in place, in working_directory"),
      opt(:control,            ["--control URI"],             OPT_STR, unset("off"),                        CONTROL_URI,         "stats, readyz, restart at unix:///PATH or tcp://HOST:PORT"),
      opt(:control_token,      ["--control-token TOKEN"],     OPT_STR, env("ORIBI_CONTROL_TOKEN", nil),     nil,                 "token the control endpoint requires; needed for TCP"),
      opt(:rackup,             nil,                           STR,     "config.ru",                         nil,                 "the Rack app to load (the RACKUP_FILE argument)"),
      opt(:working_directory,  ["--working-directory DIR"],   DIR,     HERE,                                nil,                 "where the server runs and a hot restart (USR2) starts again"),
      opt(:tmpdir,             nil,                           DIR,     env("TMPDIR", "/tmp"),               nil,                 "where large request bodies and spooled responses go"),
      opt(:before_fork,        nil,                           HOOK,    nil,                                 nil,                 "runs in the master before each worker is forked"),
      opt(:after_fork,         nil,                           HOOK,    nil,                                 nil,                 "runs in a worker right after the fork"),
      opt(:after_worker_boot,  nil,                           HOOK,    nil,                                 nil,                 "runs in a worker about to accept requests"),
      opt(:before_worker_exit, nil,                           HOOK,    nil,                                 nil,                 "runs in a worker after it drained, before it exits"),
      opt(:before_thread_start, nil,                          HOOK,    nil,                                 nil,                 "runs in each app thread before its first request"),
      opt(:lowlevel_error_handler, nil,                       HOOK,    nil,                                 nil,                 "an app's exception: its [status, headers, body] in place of the 500"),
    ].to_h { |o| [o.name, o] }.freeze
  end
end
