# frozen_string_literal: true

require "rackup/handler"
require "oribi/rack_handler"

module Rackup
  module Handler
    # Found by name through rackup's registry (Rack 3): `rackup -s oribi`,
    # Sinatra's `set :server, :oribi`, `rails server -u oribi`,
    # RACKUP_HANDLER=oribi. The contract is in Oribi::RackHandler.
    module Oribi
      extend ::Oribi::RackHandler
    end

    register :oribi, Oribi
  end
end
