# frozen_string_literal: true

# test/corpus/requests.txt: raw requests with the reaction expected of them.
# Each case is "### name: description", then "expect: STATUS... [close]" or
# "expect: timeout", an optional "bodies: N..." (body bytes the app must
# see, one per 200), then the request, escaped (\r \n \t \0 \\ \xHH), on as
# many lines as it takes (lines are joined without separator).
module Corpus
  Case = Struct.new(:name, :expect, :bodies, :request)

  def self.unescape(line)
    line.gsub(/\\(x[0-9a-fA-F]{2}|[rnt0\\])/) do
      esc = Regexp.last_match(1)
      case esc
      when "r" then "\r"
      when "n" then "\n"
      when "t" then "\t"
      when "0" then "\0"
      when "\\" then "\\"
      else esc[1..].to_i(16).chr
      end
    end
  end

  def self.load(path = File.expand_path("../corpus/requests.txt", __dir__))
    File.read(path).split(/^### /).drop(1).map do |block|
      lines = block.lines.map(&:chomp)
      name = lines.shift[/\A[^:]+/]
      expect = lines.shift.delete_prefix("expect: ").split
      bodies = lines.first.start_with?("bodies: ") ? lines.shift.delete_prefix("bodies: ").split.map(&:to_i) : nil
      request = lines.map { |l| unescape(l) }.join.b
      Case.new(name, expect, bodies, request)
    end
  end

  CASES = load.freeze
end
