# frozen_string_literal: true

require "etc"
require "socket"
require "uri"

module Oribi
  # The listening sockets. Either inherited, ready-made, from a supervisor
  # (start_server's SERVER_STARTER_PORT, systemd's LISTEN_FDS: every one is
  # used, none is bound anew, and they are never unlinked or shut down, so a
  # next generation keeps receiving on them), or bound from --bind URIs:
  # tcp://HOST:PORT (IPv4, [IPv6]) and unix:///PATH. A unix socket path is
  # checked for a live owner before a stale file is replaced, and removed on
  # exit by the process that made it. Each listener may require the PROXY
  # protocol header of its connections: its URI's ?proxy_protocol=, else
  # the proxy_protocol option. ssl://HOST:PORT?cert=PATH&key=PATH is a TCP
  # listener whose connections speak TLS (docs/TLS.md), its settings read
  # here, before any worker forks (TLSContext).
  class Listeners
    # The PROXY protocol versions a listener takes, by name, as the engine's
    # masks; "off" (nil) none.
    PROXY_PROTOCOLS = Parser::PROXY_PROTOCOLS
    # made: [inode, ctime] of the socket file this process bound, so that
    # it never removes a file another server made there since (an inode
    # number alone is soon reused)
    # tls: the settings of a TLS listener (TLS_PARAMS), else nil;
    # tls_context: the TLSContext made from them
    Listener = Struct.new(:uri, :socket, :path, :inherited, :made, :proxy_protocol, :tls, :tls_context,
                          keyword_init: true) do
      def fileno = socket.fileno
      def unix? = !path.nil?
      def proxy_mask = PROXY_PROTOCOLS.fetch(proxy_protocol, 0)

      # What a TLS listener presents, for the boot line; and that records
      # are made in user space, kernel TLS not used even where OpenSSL and
      # the kernel (its tls module) offer it (docs/TLS.md).
      def tls_text
        return "" unless tls_context

        sni = tls.fetch("sni", []).size
        " (TLS: #{tls_context.subject}, until #{tls_context.not_after&.strftime('%F')}" \
          "#{", and #{sni} more by SNI" if sni.positive?}; #{TLSContext::LIBRARY}; " \
          "kernel TLS #{Listeners.ktls_offered? ? 'offered, not used' : 'not offered'})"
      end

      # The URI, and the PROXY protocol it requires when the option (not
      # the URI) says so.
      def to_s
        return uri if proxy_protocol.nil? || uri.include?("proxy_protocol=")

        "#{uri} (proxy_protocol #{proxy_protocol})"
      end

      # Who may connect to a unix socket this process bound, for the log:
      # a proxy that may not gets EACCES and answers 502.
      def access
        return "" if path.nil? || inherited

        st = File.stat(path)
        user = Etc.getpwuid(st.uid)&.name || st.uid
        group = Etc.getgrgid(st.gid)&.name || st.gid
        who = (st.mode & 0o002).zero? ? "a proxy must run as #{user} or in group #{group} to connect" : "anyone may connect"
        format(" (mode %04o, %s:%s: %s)", st.mode & 0o777, user, group, who)
      rescue SystemCallError
        ""
      end
    end

    attr_reader :all, :supervisor
    # ssl:// binds whose TLS settings went to a socket a supervisor handed
    # over at their address (the rest of the binds are not used then).
    attr_reader :tls_binds_used

    # proxy_protocol: "v1", "v2", "any" or "off"/nil, for listeners whose
    # URI does not say
    # tls_pems: { "ssl://HOST:PORT" => { "cert_pem" =>, "key_pem" => } }
    # given in the config (Config#tls_pems)
    def initialize(binds, backlog: 1024, reuse_port: false, unix_mode: nil, proxy_protocol: nil, tls_pems: {}, env: ENV)
      @backlog = backlog
      @tls_pems = tls_pems
      @reuse_port = reuse_port
      @unix_mode = unix_mode
      @proxy_protocol = proxy_protocol == "off" ? nil : proxy_protocol
      @all = []
      @owner = Process.pid
      inherited = self.class.inheritance(env)
      if inherited
        source, specs = inherited
        # After a USR2 re-exec this process owns the sockets like ones it
        # bound, unless a supervisor handed them to the image before.
        @supervisor = source == :oribi ? env[Reexec::SUPERVISOR]&.then { |s| s.empty? ? nil : s.to_sym } : source
        @reexec = source == :oribi
        specs.each { |spec, fd| @all << adopt(spec, fd, owned: @supervisor.nil?) }
        @tls_binds_used = @supervisor ? tls_to_handed_over(binds) : []
      else
        binds.each { |b| @all.concat(bind(b)) }
      end
      @all.each { |l| l.tls_context = Listeners.tls_context(l.uri, l.tls) if l.tls }
    rescue StandardError
      close
      raise
    end

    # [supervisor, [[spec, fd], ...]] when the environment hands us
    # listeners, else nil. start_server: "SPEC=FD;SPEC=FD" where SPEC is
    # port, host:port, [v6]:port or a unix socket path. systemd: LISTEN_FDS
    # sockets from fd 3, meant for us only when LISTEN_PID is our pid.
    def self.inheritance(env = ENV)
      if (own = env["ORIBI_INHERIT"]) && !own.empty? # from our own previous generation (USR2)
        return [:oribi, own.split(";").map { |e| e.rpartition("=").then { |spec, _, fd| [spec, Integer(fd, 10)] } }]
      end
      if (ports = env["SERVER_STARTER_PORT"]) && !ports.empty?
        specs = ports.split(";").map do |entry|
          spec, fd = entry.rpartition("=").values_at(0, 2)
          raise ArgumentError, "SERVER_STARTER_PORT entry #{entry.inspect} is not SPEC=FD" if spec.empty? || fd !~ /\A\d+\z/

          [spec, Integer(fd, 10)]
        end
        return [:start_server, specs]
      end
      n = env["LISTEN_FDS"].to_i
      return nil unless n.positive? && env["LISTEN_PID"].to_i == Process.pid

      names = env["LISTEN_FDNAMES"].to_s.split(":")
      [:systemd, (0...n).map { |i| [names[i] || "fd#{3 + i}", 3 + i] }]
    end

    def fds = @all.map(&:fileno)

    # Each listener's PROXY protocol mask, in the order of fds (the engine's
    # proxy_protocols).
    def proxy_protocols = @all.map(&:proxy_mask)

    # Each listener's TLSContext or nil, in the order of fds (the engine's
    # tls_contexts).
    def tls_contexts = @all.map(&:tls_context)

    # The TLSContext of a listener's settings; a file that does not do is
    # an error naming the listener and the file.
    def self.tls_context(uri, tls)
      own = tls.except("sni")
      TLSContext.new(own).tap do |ctx|
        tls.fetch("sni", []).each { |cert, key| ctx.add_sni(TLSContext.new(own.merge("cert" => cert, "key" => key))) }
      end
    rescue TLSContext::Error => e
      raise ArgumentError, "#{uri.split('?').first}: #{e.message}"
    end

    # A next generation took the sockets over (USR2): closing ours must not
    # remove the unix socket files it now serves on.
    def handed_over!
      @all.each { |l| l.inherited = true }
    end

    # The previous generation handed over to us: the files are ours to remove.
    def take_ownership!
      @all.each { |l| l.inherited = false } if @supervisor.nil?
    end

    # After a USR2 the unix socket files are the ones the previous image
    # made, with its unix_mode: they get this config's (nil: what the umask
    # gives), as a fresh start would make them, each change logged. Not a
    # supervisor's sockets (systemd's SocketMode= says theirs).
    def apply_unix_mode
      return unless @reexec && @supervisor.nil?

      want = @unix_mode || (0o777 & ~File.umask)
      @all.each do |l|
        next unless l.unix? && (st = File.lstat(l.path)).socket?
        next if (st.mode & 0o777) == want

        File.chmod(want, l.path)
        Log.info(format("unix://%s: mode %04o (unix_mode), was %04o", l.path, want, st.mode & 0o777))
      rescue SystemCallError => e
        Log.error(format("unix://%s: cannot apply unix_mode %04o", l.path, want), e)
      end
    end

    # Closes this process's copies only (a worker that stops accepting).
    def close_sockets
      @all.each { |l| l.socket.close unless l.socket.closed? }
    end

    def close
      @all.each do |l|
        l.socket.close unless l.socket.closed?
        File.unlink(l.path) if l.path && !l.inherited && Process.pid == @owner && File.socket?(l.path) &&
                               (l.made.nil? || Listeners.identity(l.path) == l.made)
      rescue SystemCallError
        nil
      end
    end

    # URI parameters a bind takes, and their values (nil: any).
    PARAMS = { "proxy_protocol" => [*PROXY_PROTOCOLS.keys, "off"] }.freeze
    # ... and those of an ssl:// bind besides, its TLS settings (Puma's
    # names). TLS 1.2 is the least a listener speaks: no_tlsv1 and
    # no_tlsv1_1 are taken and change nothing.
    TLS_PARAMS = { "cert" => nil, "key" => nil, "ca" => nil, "verify_mode" => %w[none peer force_peer],
                   "ssl_cipher_filter" => nil, "ssl_ciphersuites" => nil, "no_tlsv1" => %w[true false],
                   "no_tlsv1_1" => %w[true false], "reuse" => %w[true false] }.freeze

    # [the URI without its parameters, { name => value }]; an unknown
    # parameter or value is an error naming what is taken.
    def self.split_params(uri)
      base, query = uri.split("?", 2)
      known = base.start_with?("ssl://") ? PARAMS.merge(TLS_PARAMS) : PARAMS
      pairs = URI.decode_www_form(query.to_s)
      params = pairs.to_h
      params.each do |name, value|
        known.key?(name) or raise ArgumentError, "#{uri}: unknown parameter #{name}: #{known.keys.join(', ')} is taken"
        taken = known[name]
        next if taken.nil? || taken.include?(value)

        raise ArgumentError, "#{uri}: #{name}=#{value}: #{taken[0..-2].join(', ')} or #{taken[-1]}"
      end
      [base, base.start_with?("ssl://") ? with_sni(uri, pairs, params) : params]
    rescue ArgumentError => e
      raise if e.message.start_with?(uri)

      raise ArgumentError, "#{uri}: #{e.message}"
    end

    # The TLS settings of an ssl:// URI's parameters (and the PEM text the
    # config gave for it), else nil.
    def self.tls_settings(base, params, pems = {})
      params.slice(*TLS_PARAMS.keys, "sni").merge(pems.fetch(base, {})) if base.start_with?("ssl://")
    end

    # More than one cert=&key= pair: the first is the listener's, the
    # others are presented to clients that name theirs (SNI), as "sni".
    def self.with_sni(uri, pairs, params)
      certs, keys = %w[cert key].map { |k| pairs.filter_map { |n, v| v if n == k } }
      raise ArgumentError, "#{uri}: each cert needs its key, in order (#{certs.size} cert, #{keys.size} key)" if certs.size != keys.size
      return params if certs.size < 2

      params.merge("cert" => certs[0], "key" => keys[0], "sni" => certs.drop(1).zip(keys.drop(1)))
    end

    # Whether OpenSSL and the kernel could put TLS records in the kernel.
    def self.ktls_offered?
      TLSContext::LIBRARY_KTLS && File.read("/proc/sys/net/ipv4/tcp_available_ulp").split.include?("tls")
    rescue SystemCallError
      false
    end

    # The PROXY protocol a listener's URI asks for, else default; nil: none.
    def self.proxy_protocol(uri, default)
      value = split_params(uri)[1].fetch("proxy_protocol", default)
      value == "off" ? nil : value
    end

    def self.parse(uri)
      case uri
      when %r{\Aunix://(/.+)\z} then [:unix, Regexp.last_match(1)]
      when %r{\A(?:tcp|ssl)://\[([0-9a-fA-F:.]+)\]:(\d+)\z}, %r{\A(?:tcp|ssl)://([^:/\[\]]+):(\d+)\z}
        port = Integer(Regexp.last_match(2), 10)
        raise ArgumentError, "port out of range in #{uri}" unless port.between?(0, 65_535)

        [:tcp, Regexp.last_match(1), port]
      else
        raise ArgumentError, "cannot bind #{uri.inspect}: use tcp://HOST:PORT, tcp://[V6]:PORT, unix:///PATH or ssl://HOST:PORT"
      end
    end

    def self.identity(path) = File.stat(path).then { |st| [st.ino, st.ctime] }

    # The socket file at PATH: raises when a live server listens there,
    # removes it when stale (left by a server that died).
    def self.remove_stale(path, label)
      UNIXSocket.new(path).close
      raise Errno::EADDRINUSE, "#{label}: another server is listening there"
    rescue Errno::ECONNREFUSED, Errno::ENOENT
      File.unlink(path)
    end

    private

    # systemd and start_server hand over sockets, not settings: an ssl://
    # bind of the config at a handed-over socket's address (its port, and
    # its host or a wildcard) gives that socket its TLS. → the binds used.
    def tls_to_handed_over(binds)
      binds.select do |uri|
        base, params = self.class.split_params(uri)
        next false unless (tls = self.class.tls_settings(base, params, @tls_pems))

        _, host, port = self.class.parse(base)
        l = @all.find { |x| !x.unix? && x.tls.nil? && at?(x.socket.local_address, host, port) } or next false
        l.tls = tls
        l.uri = l.uri.sub(/\Atcp:/, "ssl:")
        true
      end
    end

    def at?(addr, host, port)
      return false unless addr.ip_port == port

      wildcard = %w[0.0.0.0 :: localhost].include?(host)
      wildcard || addr.ip_address == host || (host == "localhost" && addr.ipv4_loopback?)
    end

    # A socket a supervisor bound for us: described, tuned like ours, and
    # otherwise left alone.
    def adopt(spec, fd, owned: false)
      sock = Socket.for_fd(fd)
      sock.autoclose = true
      sock.close_on_exec = true
      addr = sock.local_address
      raise ArgumentError, "inherited fd #{fd} (#{spec}) is not a listening stream socket" unless sock.getsockopt(:SOCKET, :ACCEPTCONN).bool

      # Ours once we serve in its place (take_ownership!); until then a failed
      # start must leave the files to the generation that still serves. The
      # spec is the URI it was bound from, parameters and all.
      if owned
        base, params = Listeners.split_params(spec)
        return Listener.new(uri: spec, socket: sock, path: (addr.unix_path if addr.unix?), inherited: true,
                            proxy_protocol: Listeners.proxy_protocol(spec, @proxy_protocol),
                            tls: Listeners.tls_settings(base, params, @tls_pems))
      end

      if addr.unix?
        Listener.new(uri: "unix://#{addr.unix_path} (inherited fd #{fd})", socket: sock, path: addr.unix_path, inherited: true,
                     proxy_protocol: @proxy_protocol)
      else
        sock.setsockopt(:TCP, :NODELAY, true)
        sock.setsockopt(:TCP, :DEFER_ACCEPT, 1) if defined?(Socket::TCP_DEFER_ACCEPT)
        host = addr.ipv6? ? "[#{addr.ip_address}]" : addr.ip_address
        Listener.new(uri: "tcp://#{host}:#{addr.ip_port} (inherited fd #{fd})", socket: sock, inherited: true,
                     proxy_protocol: @proxy_protocol)
      end
    rescue Errno::EBADF, Errno::ENOTSOCK
      raise ArgumentError, "inherited fd #{fd} (#{spec}) is not open as a socket"
    end

    # → the Listeners for uri: one, or two for localhost.
    def bind(uri)
      base, params = self.class.split_params(uri)
      proxy = self.class.proxy_protocol(uri, @proxy_protocol)
      tls = self.class.tls_settings(base, params, @tls_pems)

      kind, *rest = self.class.parse(base)
      listeners = if kind == :unix then [bind_unix(uri, rest[0])]
                  elsif rest[0] == "localhost" then bind_localhost(rest[1], uri.delete_prefix(base), base[/\A\w+/])
                  else [bind_tcp(uri, *rest)]
                  end
      listeners.each do |l|
        l.proxy_protocol = proxy
        l.tls = tls
      end
    end


    # Both loopbacks, as a client that resolves localhost may pick either
    # (Puma does the same); ::1 only where the host has IPv6. query: the
    # URI's parameters, which each one's URI keeps.
    def bind_localhost(port, query, scheme)
      v4 = bind_tcp("#{scheme}://127.0.0.1:#{port}#{query}", "127.0.0.1", port)
      begin
        [v4, bind_tcp("#{scheme}://[::1]:#{port}#{query}", "::1", port)]
      rescue Errno::EADDRNOTAVAIL, Errno::EAFNOSUPPORT
        [v4]
      end
    end

    def bind_tcp(uri, host, port)
      addr = Addrinfo.tcp(host, port)
      sock = Socket.new(addr.afamily, :STREAM, 0)
      sock.setsockopt(:SOCKET, :REUSEADDR, true)
      sock.setsockopt(:SOCKET, :REUSEPORT, true) if @reuse_port
      sock.setsockopt(:IPV6, :V6ONLY, true) if addr.ipv6?
      # Accepted sockets inherit these: no per-connection setsockopt.
      sock.setsockopt(:TCP, :NODELAY, true)
      # The kernel hands over a connection only once its request has arrived.
      sock.setsockopt(:TCP, :DEFER_ACCEPT, 1) if defined?(Socket::TCP_DEFER_ACCEPT)
      sock.bind(addr)
      sock.listen(@backlog)
      sock.close_on_exec = true
      Listener.new(uri: uri, socket: sock)
    rescue SystemCallError, SocketError => e
      sock&.close
      raise e.class, "#{uri}: #{e.message}"
    end

    def bind_unix(uri, path)
      if File.exist?(path)
        raise Errno::EEXIST, "#{uri}: exists and is not a socket" unless File.socket?(path)

        Listeners.remove_stale(path, uri)
      end
      sock = Socket.new(:UNIX, :STREAM, 0)
      sock.bind(Socket.sockaddr_un(path))
      File.chmod(@unix_mode, path) if @unix_mode
      sock.listen(@backlog)
      sock.close_on_exec = true
      Listener.new(uri: uri, socket: sock, path: path, made: Listeners.identity(path))
    end
  end
end
