# frozen_string_literal: true

require "json"
require "socket"

module Oribi
  module Bench
    # The results file of `--output FILE` (its layout in docs/BENCH.md):
    #
    #   "ORIBI-BENCH-RESULTS 1\n", a JSON line (the run: url, host, args)
    #   records, Loadgen::Results::RECORD_SIZE bytes each, written by the
    #     load generator's threads as the run goes (ext/oribi_bench/results.h)
    #   a summary record, then the run's summary as JSON (its length in the
    #     record): start time, elapsed, attack, sent, late, dropped, ...
    #   a footer: the summary record's offset (u64 LE) and "ORIBIEND"
    #
    # A run cut short leaves no summary: its file still reads, with the
    # times taken from the records.
    module Results
      MAGIC = "ORIBI-BENCH-RESULTS 1\n"
      FOOTER = "ORIBIEND"
      SUMMARY_TYPE = 0xff
      # What the summary carries: the run's own counters, not sums of records.
      SUMMARY_KEYS = %i[start_unix_ns elapsed attack sent late dropped scheduled behind busy tls_error].freeze
      HEADER_MAX = 1 << 20

      module_function

      # Creates path and writes its header: the IO to pass to the run.
      def create(path, meta)
        io = File.open(path, "wb")
        io.write(MAGIC, JSON.generate({ host: Socket.gethostname }.merge(meta)), "\n")
        io.flush
        io
      end

      # The command line for the file's header, header values left out: a
      # results file travels between hosts, an Authorization header should not.
      def shareable(argv)
        argv.each_with_index.map do |a, i|
          if i.positive? && %w[-H --header].include?(argv[i - 1])
            a.sub(/:.*/m, ": ...")
          else
            a.sub(/\A(--header=[^:]*):.*/m, '\1: ...')
          end
        end
      end

      # After the run: the summary and the footer.
      def finish(io, result)
        io.seek(0, IO::SEEK_END) # the threads wrote through the descriptor
        at = io.pos
        json = JSON.generate(result.slice(*SUMMARY_KEYS))
        io.write([0, json.bytesize, 0, 0, 0, 0, 0, 0, 0, SUMMARY_TYPE].pack("Q<4S<CCS<CC"), json,
                 [at].pack("Q<"), FOOTER)
        io.close
      end

      File_ = Struct.new(:path, :meta, :data_from, :data_to, :summary, keyword_init: true)

      # Reads a file's header and summary; the records are left for #add.
      def open(path)
        File.open(path, "rb") do |io|
          raise UsageError, "#{path}: not an oribi bench results file" unless io.read(MAGIC.bytesize) == MAGIC

          line = io.gets("\n", HEADER_MAX) or raise UsageError, "#{path}: header cut short"
          meta = JSON.parse(line, symbolize_names: true)
          from = io.pos
          summary, to = summary(io, path, from)
          File_.new(path: path, meta: meta, data_from: from, data_to: to, summary: summary)
        end
      rescue JSON::ParserError
        raise UsageError, "#{path}: bad header"
      end

      # [summary Hash or nil, where the records end].
      def summary(io, path, from)
        size = io.size
        record = Loadgen::Results::RECORD_SIZE
        tail = size - from >= record + 16 ? io.pread(16, size - 16) : ""
        return [nil, size] unless tail.end_with?(FOOTER)

        at = tail.unpack1("Q<")
        raise UsageError, "#{path}: bad footer" unless at >= from && at + record + 16 <= size && ((at - from) % record).zero?

        head = io.pread(record, at)
        length = head.unpack1("@8Q<")
        raise UsageError, "#{path}: bad summary" unless head.getbyte(record - 1) == SUMMARY_TYPE && at + record + length + 16 == size

        [JSON.parse(io.pread(length, at + record), symbolize_names: true), at]
      rescue JSON::ParserError
        raise UsageError, "#{path}: bad summary"
      end

      CHUNK = 4096 * 40

      # Adds f's records into acc, sent offset_ns after the merged start.
      def add(acc, f, offset_ns)
        File.open(f.path, "rb") do |io|
          io.seek(f.data_from)
          left = f.data_to - f.data_from
          while left >= Loadgen::Results::RECORD_SIZE
            chunk = io.read([CHUNK, left].min)
            left -= chunk.bytesize
            stop = acc.add(chunk, offset_ns)
            raise UsageError, "#{f.path}: a summary before the end of the records" if stop
          end
        end
      rescue Loadgen::Error => e
        raise UsageError, "#{f.path}: #{e.message}"
      end

      # The files' runs as one result (Loadgen.run's Hash): their records
      # added up on one clock (each file's start time), their summaries'
      # counters summed, elapsed and attack over the whole span.
      def merge(paths, series: false, hlog_interval: nil)
        files = paths.map { |p| self.open(p) }
        start = files.map { |f| f.summary&.dig(:start_unix_ns) || f.meta[:start_unix_ns] || 0 }.min
        offsets = files.map { |f| (f.summary&.dig(:start_unix_ns) || start) - start }
        span = files.zip(offsets).map { |f, o| o / 1e9 + (f.summary&.dig(:elapsed) || (series ? records_span(f) : 0)) }.max
        interval = series ? [(span / 300.0).round(3), 0.1].max : nil
        acc = Loadgen::Results.new(interval, hlog_interval)
        counts = files.zip(offsets).map do |f, o|
          before = acc.result[:sent]
          add(acc, f, o)
          acc.result[:sent] - before
        end
        result = acc.result
        result.merge!(combine(files, offsets, counts, result))
        result[:series_interval] = interval
        result[:start_unix_ns] = start
        [result, acc]
      end

      # Seconds from a file's start to its last response, from its records:
      # the plot's span for a run cut short of its summary.
      def records_span(f)
        acc = Loadgen::Results.new(nil, nil)
        add(acc, f, 0)
        acc.result[:last_end_ns] / 1e9
      end

      # The summaries' counters over the files; a file without one counts
      # its records as sent and ends with its last response.
      def combine(files, offsets, counts, records)
        s = files.zip(offsets, counts).map do |f, o, n|
          sum = f.summary || { sent: n, elapsed: records[:last_end_ns] / 1e9, attack: records[:last_sent_ns] / 1e9 }
          sum.merge(elapsed: sum[:elapsed] + o / 1e9, attack: sum[:attack] + o / 1e9)
        end
        out = { elapsed: s.map { |x| x[:elapsed] }.max, attack: s.map { |x| x[:attack] }.max,
                sent: s.sum { |x| x[:sent] }, busy: s.map { |x| x[:busy] || 0 }.max,
                tls_error: s.filter_map { |x| x[:tls_error] }.first }.compact
        if s.any? { |x| x.key?(:late) }
          out.merge!(late: s.sum { |x| x[:late] || 0 }, dropped: s.sum { |x| x[:dropped] || 0 },
                     behind: s.sum { |x| x[:behind] || 0 }, scheduled: s.sum { |x| x[:scheduled] || x[:sent] })
        end
        out
      end
    end
  end
end
