# frozen_string_literal: true

require "rack"
require "oribi/rack_handler"

# Rack 2 kept the handler registry in Rack::Handler; Rack 3 moved it to the
# rackup gem (lib/rackup/handler/oribi.rb). On Rack 3 this file defines
# nothing: Rack::Handler is absent, or rackup 1.x's alias of Rackup::Handler,
# which already finds Oribi under its own name.
if Gem::Version.new(Rack.release) < Gem::Version.new("3") && defined?(Rack::Handler)
  module Rack
    module Handler
      # `rackup -s oribi` and `Rack::Handler.get(:oribi)` on Rack 2.
      module Oribi
        extend ::Oribi::RackHandler
      end

      register :oribi, "Rack::Handler::Oribi" # Rack 2 stores class names
    end
  end
end
