# frozen_string_literal: true

require "zlib"
require "oribi/version"

module Oribi
  module Bench
    # HdrHistogram's interval log (the format of jHiccup and HdrHistogram's
    # HistogramLogWriter, version 1.3): one line per interval, its start
    # (seconds after BaseTime), length, max (milliseconds) and the interval's
    # latency histogram, in microseconds, V2-encoded, deflated and base64ed.
    # Any HdrHistogram log reader (Java, hdr-histogram-js, hdrhistogram-go,
    # the Rust crate) reads it.
    module Hlog
      COMPRESSED_COOKIE = 0x1c849314

      module_function

      # acc: Loadgen::Results built with an hlog interval of `interval`
      # seconds; start: the run's start, ns since the epoch.
      def render(acc, interval:, start_unix_ns:)
        start = start_unix_ns / 1e9
        lines = ["#[Logged with oribi bench #{Oribi::VERSION}; values in microseconds]",
                 "#[Histogram log format version 1.3]",
                 format("#[StartTime: %.3f (seconds since epoch), %s]", start, Time.at(start).utc),
                 format("#[BaseTime: %.3f (seconds since epoch)]", start),
                 '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"']
        acc.hlog.each do |index, v2, max_us, _count|
          lines << format("%.3f,%.3f,%.3f,%s", index * interval, interval, max_us / 1000.0, encode(v2))
        end
        lines.join("\n") << "\n"
      end

      # The compressed form: cookie, length, then the V2 bytes deflated.
      def encode(v2)
        z = Zlib::Deflate.deflate(v2)
        [[COMPRESSED_COOKIE, z.bytesize].pack("NN") + z].pack("m0")
      end
    end
  end
end
