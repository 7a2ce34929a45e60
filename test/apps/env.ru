# frozen_string_literal: true

run ->(env) { [200, {}, ["#{ENV['RACK_ENV']} #{Process.pid} #{env['rack.multiprocess']}"]] }
