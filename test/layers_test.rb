# frozen_string_literal: true

require "minitest/autorun"

# The C layers point down (docs/DESIGN.md): ruby/ may include loop/, http/
# and os/; loop/ http/ and os/; http/ and os/ only themselves; the load
# generator (oribi-bench/ext/oribi_bench) the server's http/ and os/. Every
# layer is compiled with -I of ext/oribi, so the compiler allows any include: this
# test holds the directions, and Ruby's headers to ruby/ (what the TSan and
# unit builds, without Ruby, would otherwise find first).
class LayersTest < Minitest::Test
  ROOT = File.expand_path("..", __dir__)
  ALLOWED = {
    "ext/oribi/ruby" => %w[ruby loop http os],
    "ext/oribi/loop" => %w[loop http os],
    "ext/oribi/http" => %w[http],
    "ext/oribi/os" => %w[os],
    "oribi-bench/ext/oribi_bench" => %w[http os],
  }.freeze

  def includes(dir)
    Dir[File.join(ROOT, dir, "*.{c,h}")].flat_map do |file|
      File.foreach(file).with_index(1).filter_map do |line, n|
        line[/\A\s*#\s*include\s+([<"][^>"]+[>"])/, 1]&.then { |inc| [File.basename(file), n, inc] }
      end
    end
  end

  def test_each_layer_includes_only_the_layers_below_it
    wrong = ALLOWED.flat_map do |dir, may|
      includes(dir).filter_map do |file, n, inc|
        layer = inc[%r{\A"(\w+)/}, 1]
        "#{dir}/#{file}:#{n}: #{inc}" if layer && !may.include?(layer)
      end
    end
    assert_empty wrong, "includes against the layers' direction"
    ALLOWED.each_key { |dir| refute_empty includes(dir), "no include found in #{dir}: the scan reads nothing" }
  end

  def test_ruby_headers_only_in_the_ruby_layer
    wrong = ALLOWED.keys.reject { |d| d.end_with?("/ruby", "/oribi_bench") }.flat_map do |dir|
      includes(dir).filter_map { |file, n, inc| "#{dir}/#{file}:#{n}: #{inc}" if inc.start_with?("<ruby") }
    end
    assert_empty wrong
  end
end
