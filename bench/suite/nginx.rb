# frozen_string_literal: true

module Bench
  module Suite
    # nginx, run unprivileged-style as a child (`nginx -p DIR -c CONF -g
    # 'daemon off;'`, pid, logs and temp files in the suite's tmpdir): the
    # `return 200` ceiling, and the reverse proxy in front of each server
    # for the nginx cells (upstream keep-alive to the server's unix socket,
    # or its TCP port when it has none).
    module Nginx
      module_function

      def available?
        system("nginx", "-v", %i[out err] => File::NULL)
      rescue SystemCallError
        false
      end

      # Common head of both configurations. Running as root, nginx would
      # switch its workers to `nobody`, who cannot open a socket in the
      # suite's 0700 tmpdir: keep them root then.
      def head(dir, workers)
        <<~CONF
          #{Process.uid.zero? ? 'user root;' : ''}
          worker_processes #{workers};
          pid #{dir}/nginx.pid;
          error_log #{dir}/nginx-error.log warn;
          events { worker_connections 4096; }
        CONF
      end

      def temp_paths(dir)
        %w[client_body proxy fastcgi uwsgi scgi].map { |t| "#{t}_temp_path #{dir};" }.join(" ")
      end

      def argv(conf, dir)
        ["nginx", "-p", dir, "-c", conf, "-g", "daemon off;"]
      end

      # The ceiling: nginx answering the hello-world body itself.
      def return200_argv(dir, workers, unix, port)
        conf = File.join(dir, "nginx-return200.conf")
        listens = []
        listens << "listen unix:#{unix} backlog=1024;" if unix
        listens << "listen 127.0.0.1:#{port} backlog=1024;" if port
        File.write(conf, head(dir, workers) + <<~CONF)
          http {
            access_log off; #{temp_paths(dir)}
            keepalive_requests 1000000;
            server {
              #{listens.join("\n      ")}
              location / { default_type text/plain; return 200 "Hello, World!\\n"; }
            }
          }
        CONF
        argv(conf, dir)
      end

      # The proxy in front of a server: clients on 127.0.0.1:PORT, the
      # server upstream at unix:PATH or 127.0.0.1:UPSTREAM_PORT, with a pool
      # of up to KEEPALIVE idle upstream connections.
      def proxy_argv(dir, workers, port, upstream, keepalive: 64)
        conf = File.join(dir, "nginx-proxy.conf")
        File.write(conf, head(dir, workers) + <<~CONF)
          http {
            access_log off; #{temp_paths(dir)}
            keepalive_requests 1000000;
            client_max_body_size 1m;
            client_body_buffer_size 128k;
            upstream app { server #{upstream}; keepalive #{keepalive}; }
            server {
              listen 127.0.0.1:#{port} backlog=1024;
              location / {
                proxy_pass http://app;
                proxy_http_version 1.1;
                proxy_set_header Connection "";
                proxy_set_header Host $host;
              }
            }
          }
        CONF
        argv(conf, dir)
      end
    end
  end
end
