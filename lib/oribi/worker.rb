# frozen_string_literal: true

module Oribi
  # One worker process: the C engine owns the sockets and hands over
  # complete requests; this loop calls the app and gives back the response.
  class Worker
    ERROR_HEADERS = { "content-type" => "text/plain" }.freeze
    ERROR_BODY = ["Internal Server Error\n"].freeze

    attr_reader :engine

    def initialize(app, listeners, config, index: 0)
      @app = app
      @index = index
      @engine = Engine.new(listeners.fds, config.engine_options.merge(multiprocess: config[:workers] > 1))
    end

    # TERM, INT and QUIT drain: finish in-flight requests, then return.
    def run
      %w[TERM INT QUIT].each { |sig| trap(sig) { @engine.stop } }
      while (env = @engine.next_request)
        serve(env)
      end
    ensure
      @engine.close
    end

    private

    def serve(env)
      status, headers, body, error = call_app(env)
      @engine.respond(env, status, headers, body, error)
    rescue SystemExit, SignalException
      raise
    rescue Exception => e # rubocop:disable Lint/RescueException
      # The engine already answered (500 or a close) and closed the body.
      Log.error("#{env['REQUEST_METHOD']} #{env['REQUEST_URI']}: response failed", e)
    end

    def call_app(env)
      @app.call(env)
    rescue SystemExit, SignalException
      raise
    rescue Exception => e # rubocop:disable Lint/RescueException
      Log.error("#{env['REQUEST_METHOD']} #{env['REQUEST_URI']}: app raised", e)
      [500, ERROR_HEADERS.dup, ERROR_BODY, e] # e goes to rack.response_finished
    end
  end
end
