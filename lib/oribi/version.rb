# frozen_string_literal: true

module Oribi
  VERSION = "0.1.0"
end
