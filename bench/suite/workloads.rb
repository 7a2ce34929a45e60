# frozen_string_literal: true

module Bench
  module Suite
    # What the servers are asked to serve: an app (bench/apps/) and the one
    # request the load generator repeats.
    Workload = Struct.new(:name, :app, :method, :path, :body, :content_type, :about, keyword_init: true) do
      def request(host, keepalive:)
        head = +"#{method} #{path} HTTP/1.1\r\nHost: #{host}\r\nUser-Agent: oribi-bench\r\n"
        head << "Connection: close\r\n" unless keepalive
        if body
          head << "Content-Type: #{content_type || 'application/octet-stream'}\r\nContent-Length: #{body.bytesize}\r\n"
        end
        head << "\r\n"
        head = head.b
        head << body if body
        head
      end

      # What a readiness probe sends: the same path, GET, no body.
      def probe(host)
        "GET #{path} HTTP/1.1\r\nHost: #{host}\r\nConnection: close\r\n\r\n"
      end
    end

    APPS = File.expand_path("../apps", __dir__)

    # 20 parameters as a search or filter form sends them: plain names,
    # escapes, a hash and an array (bench/apps/sinatra.ru reads them).
    PARAMS = ["q=ruby+rack+server", "page=2", "per_page=50", "sort=created_at", "order=desc",
              "lang=en-US", "tz=Europe%2FParis", "from=2026-01-01", "to=2026-11-24", "min_price=10",
              "max_price=250.5", "in_stock=1", "brand=Acme+%26+Co", "color=dark+blue", "size=M",
              "filter[status]=open", "filter[owner]=ann%40example.com", "filter[tags][]=fast",
              "filter[tags][]=c", "ref=https%3A%2F%2Fexample.com%2F%3Fa%3D1"].join("&").freeze

    WORKLOADS = [
      Workload.new(name: "hello", app: File.join(APPS, "hello.ru"), method: "GET", path: "/",
                   about: "14-byte body, the server's own cost"),
      Workload.new(name: "big", app: File.join(APPS, "big.ru"), method: "GET", path: "/",
                   about: "100 KiB body"),
      Workload.new(name: "sinatra", app: File.join(APPS, "sinatra.ru"), method: "GET", path: "/items/42",
                   about: "Sinatra 4 route with a param and an ERB template"),
      Workload.new(name: "sinatra-query", app: File.join(APPS, "sinatra.ru"), method: "GET",
                   path: "/search?#{PARAMS}", about: "Sinatra route reading a 20-parameter query string"),
      Workload.new(name: "sinatra-form", app: File.join(APPS, "sinatra.ru"), method: "POST", path: "/search",
                   body: PARAMS, content_type: "application/x-www-form-urlencoded",
                   about: "Sinatra route reading a 20-field urlencoded form"),
      Workload.new(name: "rails", app: File.join(APPS, "rails_api.ru"), method: "GET", path: "/items/42",
                   about: "Rails 7.2 API controller rendering JSON, production mode"),
      Workload.new(name: "sleep", app: File.join(APPS, "sleep.ru"), method: "GET", path: "/",
                   about: "the app sleeps 10 ms"),
      Workload.new(name: "post", app: File.join(APPS, "post.ru"), method: "POST", path: "/",
                   body: ("p" * 65_536).b.freeze, about: "64 KiB request body read by the app")
    ].freeze

    def self.workload(name)
      WORKLOADS.find { |w| w.name == name } or
        raise ArgumentError, "unknown workload #{name} (known: #{WORKLOADS.map(&:name).join(', ')})"
    end

    # Where the load generator connects, and how: a unix socket or TCP to
    # the server, or TCP to nginx in front of it.
    TRANSPORTS = %w[unix tcp nginx].freeze
    MODES = %w[keep-alive close].freeze
  end
end
