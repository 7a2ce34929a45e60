# frozen_string_literal: true

# Read once, at boot: what a restart with new code changes (rails_test.rb).
BOOT_VERSION = File.exist?(File.expand_path("../../VERSION", __dir__)) ? File.read(File.expand_path("../../VERSION", __dir__)).strip : "v1"
