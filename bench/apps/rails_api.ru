# frozen_string_literal: true

# A Rails API app in one file, in production mode: a controller renders
# JSON from an in-memory record, the way an API endpoint renders a model.
# The suite requests /items/42.
ENV["RAILS_ENV"] ||= "production"
require "action_controller/railtie"

class BenchRailsApp < Rails::Application
  config.load_defaults 7.2
  config.api_only = true
  # what a generated config/environments/production.rb says
  config.eager_load = true
  config.enable_reloading = false
  config.consider_all_requests_local = false
  config.public_file_server.enabled = false
  config.logger = Logger.new(nil)
  config.log_level = :fatal
  config.secret_key_base = "0" * 64
  config.root = __dir__
  routes.append { get "/items/:id", to: "items#show" }
end

class ItemsController < ActionController::API
  RECORDS = Array.new(100) do |i|
    { id: i, name: "item #{i}", price: (i * 3.5).round(2), tags: %w[a b c], updated_at: Time.utc(2026, 1, 1) + i }
  end.freeze

  def show
    id = Integer(params[:id], 10)
    render json: { item: RECORDS[id % RECORDS.size], related: RECORDS.first(10).map { |r| r.slice(:id, :name) } }
  end
end

BenchRailsApp.initialize!
run BenchRailsApp
