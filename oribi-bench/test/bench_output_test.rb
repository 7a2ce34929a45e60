# frozen_string_literal: true

require_relative "support/bench_cli"
require "tmpdir"
require "zlib"
require "open3"
require_relative "support/tiny_server"

# `--output FILE` (every result as the run goes) and `oribi bench report
# FILE…`: a report rendered from the file is the run's own, merging files
# adds runs up, and the HdrHistogram interval log reads back to the same
# histogram, with our decoder and with hdr-histogram-js when installed.
class BenchOutputTest < Minitest::Test
  OK = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
  BUSY = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy"
  RECORD = 40

  include BenchCLIHelper

  # Answers 200 and a 503 every 7th request on a connection; closes the
  # connection without a word at its 11th (the client sends it again on a
  # new one) and every 5th new connection at its first (a read error).
  def serve(&block)
    lock = Mutex.new
    opened = 0
    handler = lambda do |sock, _head, i|
      next nil if i == 10 || (i.zero? && (lock.synchronize { opened += 1 } % 5).zero?)

      sock.write((i % 7) == 6 ? BUSY : OK)
      :keep
    end
    TinyServer.serving(handler, &block)
  end

  def setup
    @dir = Dir.mktmpdir("oribi-output")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def path(name) = File.join(@dir, name)

  def test_report_from_the_file_is_the_runs_own
    serve do |url|
      %w[text json hist].each do |format|
        file = path("#{format}.bin")
        rc, live, = bench("-r", "400", "-d", "1s", "-T", "2", "--format", format, "--output", file, url)
        assert_equal 0, rc
        rc, again, = bench("report", "--format", format, file)
        assert_equal 0, rc
        assert_equal live, again, "#{format} from the file"
        next unless format == "json"

        j = JSON.parse(live)
        assert_operator j["status_codes"]["503"], :>, 0
        # Thresholds hold the saved run to account as they would the live one.
        assert_equal [1, 0], ["success>99.9%", "success>50%"].map { |t| bench("report", "--threshold", t, file)[0] }
        assert_operator j["error_counts"]["read"], :>, 0, "the server's closes are in the file too"
        assert_operator j["retried"], :>, 0
      end
    end
  end

  # One run's records dealt into two files, as two hosts would have written
  # them, each with its share of the counters: merged, they are the run.
  def test_merged_files_report_as_the_single_run
    serve do |url|
      whole = path("whole.bin")
      _, live, = bench("-r", "300", "-d", "1s", "-T", "2", "--format", "json", "--output", whole, url)
      a, b = split(whole)
      rc, merged, = bench("report", "--format", "json", a, b)
      assert_equal 0, rc
      assert_equal JSON.parse(live), JSON.parse(merged)
      _, text_one, = bench("report", whole)
      _, text_two, = bench("report", a, b)
      assert_equal text_one, text_two
    end
  end

  def split(file)
    bytes = File.binread(file)
    header_end = bytes.index("\n", Oribi::Bench::Results::MAGIC.bytesize) + 1
    summary_at = bytes[-16, 8].unpack1("Q<")
    records = bytes[header_end...summary_at].scan(/.{#{RECORD}}/mo)
    summary = JSON.parse(bytes[summary_at + RECORD...-16], symbolize_names: true)
    odd, even = records.partition.with_index { |_, i| i.odd? }
    shares = [summary.merge(sent: odd.size, scheduled: summary[:scheduled] - even.size),
              summary.merge(sent: even.size, scheduled: even.size, late: 0, dropped: 0, behind: 0)]
    [odd, even].zip(shares, %w[a.bin b.bin]).map do |recs, share, name|
      io = File.open(path(name), "wb")
      io.write(bytes[0, header_end], recs.join)
      Oribi::Bench::Results.finish(io, share)
      path(name)
    end
  end

  def test_runs_from_two_starts_merge_on_one_clock
    serve do |url|
      one = path("one.bin")
      two = path("two.bin")
      _, a, = bench("-r", "200", "-d", "500ms", "-T", "1", "--format", "json", "--output", one, url)
      _, b, = bench("-r", "100", "-d", "500ms", "-T", "1", "--format", "json", "--output", two, url)
      rc, m, = bench("report", "--format", "json", "--plot", path("p.html"), one, two)
      assert_equal 0, rc
      a, b, m = [a, b, m].map { |s| JSON.parse(s) }
      assert_equal a["requests"] + b["requests"], m["requests"]
      assert_equal a["bytes_in"]["total"] + b["bytes_in"]["total"], m["bytes_in"]["total"]
      # The second started after the first ended: the merged attack spans both.
      assert_operator m["duration"], :>=, 2 * 0.49e9
      assert_includes File.read(path("p.html")), "uPlot"
    end
  end

  def test_a_file_cut_short_still_reads
    serve do |url|
      file = path("cut.bin")
      _, live, = bench("-r", "200", "-d", "500ms", "-T", "1", "--format", "json", "--output", file, url)
      bytes = File.binread(file)
      summary_at = bytes[-16, 8].unpack1("Q<")
      File.binwrite(file, bytes[0, summary_at - 15]) # the last record half written, no summary
      rc, out, = bench("report", "--format", "json", "--plot", path("cut.html"), file)
      assert_equal 0, rc
      assert_equal JSON.parse(live)["requests"] - 1, JSON.parse(out)["requests"]
      assert_includes File.read(path("cut.html")), '"count":'
    end
  end

  def test_the_header_names_the_run_without_header_values
    serve do |url|
      file = path("h.bin")
      bench("-n", "2", "-c", "1", "-T", "1", "-H", "Authorization: Bearer s3cret", "--output", file, url)
      header = JSON.parse(File.binread(file).lines[1])
      assert_equal url, header["url"]
      assert_includes header["args"], "Authorization: ..."
      refute_includes File.binread(file), "s3cret"
    end
  end

  def test_bad_files_are_refused_with_one_line
    File.write(path("not.bin"), "hello\n")
    serve do |url|
      file = path("r.bin")
      bench("-n", "5", "-c", "1", "-T", "1", "--output", file, url)
      bytes = File.binread(file)
      at = bytes.index("\n", 30) + 1
      bytes.setbyte(at + 39, 7) # a record type nobody writes
      File.binwrite(path("bad.bin"), bytes)
    end
    [[path("not.bin")], [path("bad.bin")], [path("missing.bin")], []].each do |files|
      rc, out, err = bench("report", *files)
      assert_equal 2, rc, files.inspect
      assert_empty out
      assert_match(/\Aoribi bench report: [^\n]+\n\z/, err)
    end
    rc, _, err = bench("-n", "1", "--output", "/nonexistent/dir/r.bin", "http://127.0.0.1:9/")
    assert_equal 2, rc
    assert_match(/cannot write/, err)
  end

  # HdrHistogram's V2 encoding, read back as the format describes it.
  def decode(b64)
    raw = b64.unpack1("m0")
    cookie, length = raw.unpack("NN")
    assert_equal 0x1c849314, cookie
    v2 = Zlib::Inflate.inflate(raw[8, length])
    cookie, payload, _, digits, low, high = v2.unpack("NNNNQ>Q>")
    assert_equal [0x1c849313, 3, 1, 2**32 - 1], [cookie, digits, low, high]
    counts = []
    bytes = v2.byteslice(40, payload).bytes
    until bytes.empty?
      z = 0
      shift = 0
      loop do
        byte = bytes.shift
        z |= (byte & 0x7f) << shift
        shift += 7
        break if byte < 0x80
      end
      n = (z >> 1) ^ -(z & 1)
      n.negative? ? counts.concat([0] * -n) : counts << n
    end
    counts
  end

  def test_hlog_reads_back_to_the_runs_histogram
    serve do |url|
      file = path("h.bin")
      _, live, = bench("-r", "400", "-d", "1s", "-T", "2", "--format", "json", "--output", file, url)
      rc, log, = bench("report", "--format", "hlog", "--interval", "250ms", file)
      assert_equal 0, rc
      lines = log.lines.reject { |l| l.start_with?("#", '"') }
      assert_equal 4, lines.size, log
      counts = lines.map { |l| decode(l.split(",")[3].chomp) }
      j = JSON.parse(live)
      samples = j["requests"] - j["error_counts"].values.sum + j["error_counts"]["timeout"]
      assert_equal samples, counts.sum(&:sum)
      # Index i of HdrHistogram's counts (1 µs to 2^32 - 1, 3 digits) is our
      # bucket i: the lowest sample's bucket is the lowest counted.
      total = counts.each_with_object(Hash.new(0)) { |c, h| c.each_with_index { |n, i| h[i] += n } }
      assert_equal bucket(j["latencies"]["min"] / 1000), total.keys.select { |i| total[i].positive? }.min
      check_with_hdr_histogram_js(log, samples, j)
    end
  end

  # HdrHistogram's counts index of v: exact below 2048, then 1024 a power of two.
  def bucket(v)
    shift = [v.bit_length - 11, 0].max
    (shift << 10) + (v >> shift)
  end

  # The lowest value of v's bucket, as HdrHistogram reports a minimum.
  def lowest(v)
    shift = [v.bit_length - 11, 0].max
    (v >> shift) << shift
  end

  # The reference reader, when installed (CI: npm install --prefix test/vendor).
  def check_with_hdr_histogram_js(log, samples, report)
    modules = File.expand_path("vendor/node_modules", __dir__)
    skip "hdr-histogram-js not installed in #{modules}" unless File.directory?(File.join(modules, "hdr-histogram-js"))
    js = <<~JS
      const hdr = require("hdr-histogram-js");
      const reader = new hdr.HistogramLogReader(require("fs").readFileSync(0, "utf8"));
      const total = hdr.build({ highestTrackableValue: 2 ** 32 - 1, numberOfSignificantValueDigits: 3 });
      let h; while ((h = reader.nextIntervalHistogram()) != null) total.add(h);
      console.log(JSON.stringify({ count: total.totalCount, min: total.minNonZeroValue, p50: total.getValueAtPercentile(50) }));
    JS
    out, err, st = Open3.capture3({ "NODE_PATH" => modules }, "node", "-e", js, stdin_data: log)
    assert st.success?, err
    got = JSON.parse(out)
    assert_equal samples, got["count"]
    assert_equal lowest(report["latencies"]["min"] / 1000), got["min"]
    assert_in_delta report["latencies"]["50th"] / 1000, got["p50"], got["p50"] / 1024.0
  end
end
