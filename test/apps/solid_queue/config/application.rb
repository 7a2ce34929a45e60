# frozen_string_literal: true

# A Rails app as Rails 8 sets up jobs: Active Job on Solid Queue, in the
# app's own SQLite database (DB_PATH), for test/solid_queue_test.rb.
# GET /enqueue?id=N queues WriteRowJob(N), which writes row N with the pid
# of the process that ran it and the release (RELEASE) its code came from.
require "rails"
require "active_record/railtie"
require "active_job/railtie"
require "action_controller/railtie"
require "solid_queue"

class JobsApp < Rails::Application
  config.load_defaults Rails::VERSION::STRING.to_f
  config.root = File.expand_path("..", __dir__)
  config.eager_load = false
  config.secret_key_base = "x" * 64
  config.hosts.clear
  config.logger = ActiveSupport::Logger.new($stdout)
  config.log_level = :warn
  config.active_job.queue_adapter = :solid_queue
  config.solid_queue.silence_polling = true
end
