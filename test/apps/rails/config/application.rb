# frozen_string_literal: true

require_relative "boot"
require "action_controller/railtie"

# The smallest Rails app `rails server -u oribi` can serve: no database, no
# assets, no credentials file.
module OribiTestApp
  class Application < Rails::Application
    config.root = File.expand_path("..", __dir__)
    config.eager_load = false
    config.secret_key_base = "oribi-test-only-#{'0' * 48}"
    # The test client's Host header is not one Rails' development defaults allow.
    config.hosts.clear
    config.logger = ActiveSupport::Logger.new($stdout)
    # Behind a proxy that serves files (Thruster): send_file answers with
    # an X-Sendfile header and no body. Off unless the test sets it.
    config.action_dispatch.x_sendfile_header = ENV.fetch("X_SENDFILE_HEADER", nil)
  end
end
