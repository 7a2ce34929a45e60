# frozen_string_literal: true

# Loaded into a Ruby server with RUBYOPT=-r by bench/late_writers.rb: its TCP
# listeners go without TCP_DEFER_ACCEPT (a setsockopt of it is skipped), as
# every TCP listener on macOS and the BSDs does, so that a connection is
# accepted before its request has come. The same for every server it
# starts (Oribi, Unicorn, Puma), whichever spelling it uses.
require "socket"

module Bench
  module NoDeferAccept
    LEVELS = %w[TCP IPPROTO_TCP SOL_TCP].freeze
    NAMES = %w[DEFER_ACCEPT TCP_DEFER_ACCEPT].freeze

    def setsockopt(*args)
      return 0 if args.size >= 2 && NoDeferAccept.defer_accept?(*args.first(2))

      super
    end

    def self.defer_accept?(level, name)
      tcp = level.is_a?(Integer) ? level == Socket::IPPROTO_TCP : LEVELS.include?(level.to_s)
      tcp && (name.is_a?(Integer) ? name == Socket::TCP_DEFER_ACCEPT : NAMES.include?(name.to_s))
    end
  end
end

BasicSocket.prepend(Bench::NoDeferAccept) if defined?(Socket::TCP_DEFER_ACCEPT)
