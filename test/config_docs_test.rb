# frozen_string_literal: true

require "test_helper"

# docs/CONFIGURATION.md against the Options table, which --help, the config
# file and rackup -O are built from: every option is in the doc with its
# flags and default, and the doc names no option or flag the table lacks.
class ConfigDocsTest < Minitest::Test
  DOC = File.read(File.join(ROOT, "docs/CONFIGURATION.md"))
  OPTIONS = Oribi::Options::ALL

  # A doc table row: the names in its first cell and its other cells, with
  # backticks dropped (`\|` in a cell is a literal bar).
  Row = Struct.new(:names, :cells, :hook)

  def self.rows(doc)
    header = nil
    doc.each_line.filter_map do |line|
      next header = nil unless line.start_with?("|")

      cells = line.strip.split(/(?<!\\)\|/)[1..].map { |c| c.strip.delete("`") }
      next if cells.first.match?(/\A-+\z/)
      if header.nil?
        header = cells
        next
      end

      hook = header.first == "hook"
      names = hook ? [cells.first[/\A\w+/]] : cells.first.sub(/\s*\(.*/, "").split(/,\s*/)
      Row.new(names.map(&:to_sym), header.zip(cells).to_h, hook)
    end
  end

  # What in the doc disagrees with the table, one line each.
  def self.mismatches(doc)
    rows = rows(doc)
    documented = rows.flat_map(&:names)
    problems = (documented - OPTIONS.keys).map { |n| "#{n}: in the doc, not an option" }
    problems += (OPTIONS.keys - documented).map { |n| "#{n}: an option missing from the doc" }
    rows.each { |row| problems.concat(row_mismatches(row)) }
    problems + example_mismatches(doc) + env_mismatches(doc)
  end

  # Each environment variable a default reads is listed where the doc says
  # where options come from.
  def self.env_mismatches(doc)
    section = doc[/^## Where options come from\n(.*?)^## /m, 1].to_s
    vars = OPTIONS.values.flat_map { |o| o.shown.scan(/\$([A-Z_]+)/).flatten }.uniq
    vars.reject { |v| section.include?("`#{v}`") }.map { |v| "$#{v}: not among the environment variables" }
  end

  def self.row_mismatches(row)
    opts = row.names.filter_map { |n| OPTIONS[n] }
    return [] if opts.empty?
    return opts.reject(&:hook?).map { |o| "#{o.name}: in the hooks table, not a hook" } if row.hook

    flag_cell = row.cells.fetch("flag")
    default = row.cells.fetch("default")
    opts.flat_map do |o|
      next ["#{o.name}: a hook outside the hooks table"] if o.hook?

      missing = Array(o.flags).reject { |f| flag_cell.include?(f) }.map { |f| "#{o.name}: flag #{f} missing" }
      shown = default == o.shown || default.start_with?("#{o.shown} (")
      missing + (shown ? [] : ["#{o.name}: default #{default.inspect}, table says #{o.shown.inspect}"])
    end + extra_flags(opts, flag_cell)
  end

  # Flags the doc gives that none of the row's options has.
  def self.extra_flags(opts, flag_cell)
    known = opts.flat_map { |o| Array(o.flags).map { |f| f[/\A\S+/] } }
    (flag_cell.scan(/(?<![\w-])--?\[?[\w\]-]+/) - known).map { |f| "#{opts.map(&:name).join(', ')}: doc flag #{f} unknown" }
  end

  # The config file example calls options (and bind) only.
  def self.example_mismatches(doc)
    example = doc[/```ruby\n(.*?)```/m, 1].to_s
    calls = example.lines.filter_map { |l| l[/\A([a-z_]+)[ ({]/, 1] }
    (calls.map(&:to_sym) - OPTIONS.keys - [:bind]).map { |c| "#{c}: the example calls an unknown option" }
  end

  def test_the_doc_agrees_with_the_table
    assert_empty self.class.mismatches(DOC)
  end

  def test_a_disagreement_is_caught
    wrong = {
      "| keepalive_timeout | `--keepalive-timeout SEC` | duration | 20 |" =>
        "| keepalive_timeout | `--keepalive-timeout SEC` | duration | 25 |",
      "| backlog | `--backlog N` |" => "| backlog | `--backlog-size N` |",
      "| reuse_port |" => "| reuse_ports |",
    }
    wrong.each do |right, bad|
      assert_includes DOC, right
      refute_empty self.class.mismatches(DOC.sub(right, bad)), "#{bad} went unnoticed"
    end
    refute_empty self.class.mismatches(DOC.sub(/^\| pid_file .*\n/, "")), "a missing option went unnoticed"
    refute_empty self.class.mismatches(DOC.sub("`TMPDIR`", "TMPDIR")), "an unlisted variable went unnoticed"
  end
end
