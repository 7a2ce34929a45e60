# frozen_string_literal: true

# Oribi's own bundle (its :ecosystem group has railties and actionpack); the
# test copies this app elsewhere and sets BUNDLE_GEMFILE itself.
ENV["BUNDLE_GEMFILE"] ||= File.expand_path("../../../../Gemfile", __dir__)
require "bundler/setup"
