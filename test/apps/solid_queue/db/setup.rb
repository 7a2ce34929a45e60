# frozen_string_literal: true

# Creates the app's database: its rows table and Solid Queue's tables
# (the schema `bin/rails solid_queue:install` copies into an app).
require_relative "../config/environment"

ActiveRecord::Schema.define do
  create_table :rows, id: :integer do |t|
    t.integer :pid
    t.string :release
  end
end
load File.join(Gem.loaded_specs["solid_queue"].full_gem_path, "lib/generators/solid_queue/install/templates/db/queue_schema.rb")
