# frozen_string_literal: true

require_relative "../../test/test_helper"
require "oribi/bench"
require "oribi/tune"

# docs/BENCH.md and docs/TUNE.md against the tools' option tables, which
# their --help is built from: each option has a row whose first cell is its
# flags and whose meaning ends with its default in parentheses, and no row
# names a flag the table lacks.
class ToolDocsTest < Minitest::Test
  TABLES = {
    "docs/BENCH.md" => { "## Options (default)" => Oribi::Bench::OPTIONS,
                         "## Results files and `oribi bench report`" => Oribi::Bench::REPORT_OPTIONS },
    "docs/TUNE.md" => { "## Options (default)" => Oribi::Tune::OPTIONS }
  }.freeze

  # { first cell => meaning } of the first table under heading.
  def self.rows(doc, heading)
    section = doc[/^#{Regexp.escape(heading)}\n(.*?)(?=^## |\z)/m, 1] or return nil
    table = section[/(^\|.*\n)+/] or return nil
    table.lines.drop(2).to_h do |line|
      cells = line.strip.split(/(?<!\\)\|/)[1..].map(&:strip)
      [cells[0].delete("`"), cells[1].to_s.delete("`")]
    end
  end

  def self.mismatches(doc, heading, options)
    rows = rows(doc, heading) or return ["#{heading}: no options table"]
    problems = (rows.keys - options.map(&:synopsis)).map { |cell| "#{heading}: #{cell}: not an option" }
    options.each do |o|
      meaning = rows[o.synopsis] or next problems << "#{heading}: #{o.synopsis}: no row"
      shown = Oribi::ToolOptions.shown(o) or next

      problems << "#{heading}: #{o.synopsis}: the default is not (#{shown})" unless meaning.end_with?("(#{shown})")
    end
    problems
  end

  def test_the_docs_follow_the_option_tables
    problems = TABLES.flat_map do |path, tables|
      doc = File.read(File.join(__dir__, "..", path))
      tables.flat_map { |heading, options| self.class.mismatches(doc, heading, options).map { |m| "#{path} #{m}" } }
    end
    assert_empty problems
  end

  def test_a_doc_that_disagrees_is_caught
    doc = "## Options (default)\n\n| option | meaning |\n|---|---|\n| `-c, --connections N` | connections (12) |\n" \
          "| `--bogus` | nothing |\n"
    problems = self.class.mismatches(doc, "## Options (default)", Oribi::Bench::OPTIONS)
    assert_includes problems, "## Options (default): -c, --connections N: the default is not (10)"
    assert_includes problems, "## Options (default): --bogus: not an option"
    assert_includes problems, "## Options (default): -T, --threads N: no row"
  end

  def test_help_says_every_default
    [Oribi::Bench::OPTIONS, Oribi::Bench::REPORT_OPTIONS, Oribi::Tune::OPTIONS].each do |table|
      help = table.define(OptionParser.new, {}).help
      table.filter_map { |o| Oribi::ToolOptions.shown(o) }.each { |shown| assert_includes help.gsub(/\s+/, " "), "(default #{shown})" }
    end
  end
end
