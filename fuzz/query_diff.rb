# frozen_string_literal: true

# Long-running differential fuzzing of fast_query_parser: seeded random
# inputs (test/support/query_differential.rb, longer than the test's)
# through Rack::QueryParser and Oribi::QueryParser until SECONDS pass.
# Prints each mismatch (up to 20) and a summary; exits 1 on any.
#
#   bundle exec rake compile
#   bundle exec ruby fuzz/query_diff.rb [SECONDS=60] [FIRST_SEED=random] [MAX_PAIRS=40]
#
# MAX_PAIRS bounds the pairs of an input: 40 reaches the longer names and
# repeated keys; 8 compares about three times as many inputs a second
# (runs towards a count of millions).
# A mismatch is printed with its seed and all it takes to replay it
# (limits, method, input and its encoding, separator): it belongs in the
# hand-written cases of test/query_parser_test.rb once fixed.
$LOAD_PATH.unshift File.expand_path("../lib", __dir__), File.expand_path("../test", __dir__)
require "support/query_differential"
require "pp"

seconds = Float(ARGV[0] || 60)
seed = Integer(ARGV[1] || Random.new_seed % 2**32)
max_pairs = Integer(ARGV[2] || 40)
deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
compared = 0
mismatches = 0
per_seed = 2000
while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  rng = Random.new(seed)
  per_seed.times do
    diff = QueryDifferential.random_case(rng, max_pairs: max_pairs)
    compared += 1
    next unless diff

    mismatches += 1
    puts "seed #{seed}:", diff.pretty_inspect if mismatches <= 20
  end
  seed += 1
end
puts "#{compared} inputs compared (seeds up to #{seed - 1}), #{mismatches} mismatches"
exit(mismatches.zero? ? 0 : 1)
