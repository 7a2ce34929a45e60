# frozen_string_literal: true

module Oribi
  module Tune
    # The live line on a terminal: which setting, which probe, the rate
    # being offered and the p99 of the last probe, rewritten in place.
    class Progress
      def initialize(io)
        @io = io
      end

      def update(*args, **kw)
        @io.write("\r\e[K" + self.class.line(*args, **kw))
        @io.flush
      end

      def finish
        @io.write("\r\e[K")
        @io.flush
      end

      # setting: "2w×4t"; index/total: settings; what: "warm-up", "probe 3/8"...
      def self.line(setting, index, total, what, rate: nil, last_p99: nil)
        s = +"[#{index}/#{total}] #{setting}  #{what}"
        s << format("  %.0f/s", rate) if rate
        s << format("  last p99 %.1fms", last_p99 * 1000) if last_p99
        s
      end
    end
  end
end
