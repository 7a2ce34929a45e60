# frozen_string_literal: true

# test/corpus/requests.txt: raw requests with the reaction expected of them.
# Each case is "### name: description", then "expect: STATUS... [close]" or
# "expect: timeout", an optional "bodies: N..." (body bytes the app must
# see, one per 200), then the request, escaped (\r \n \t \0 \\ \xHH), on as
# many lines as it takes (lines are joined without separator).
module Corpus
  Case = Struct.new(:name, :expect, :bodies, :request)

  def self.unescape(text)
    text.gsub(/\\(?:x(\h\h)|(.))/m) do
      next Regexp.last_match(1).hex.chr if Regexp.last_match(1)

      { "r" => "\r", "n" => "\n", "t" => "\t", "0" => "\0", "\\" => "\\" }.fetch(Regexp.last_match(2)) do
        raise ArgumentError, "unknown escape \\#{Regexp.last_match(2)}"
      end
    end.b
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
