# frozen_string_literal: true

require "minitest/autorun"
require "oribi/oribi"

# Oribi::Parser.decode_chunked over the C chunked decoder (RFC 9112 7.1),
# fed whole, byte by byte and in every two-piece split; and the same input
# through discard_chunked, the mode the load generator reads responses in,
# which must agree on the verdict, the data size and where the body ends.
class ChunkedTest < Minitest::Test
  P = Oribi::Parser

  def decode(input)
    P.decode_chunked(input.is_a?(Array) ? input.map(&:b) : input.b)
  end

  def discard(input)
    P.discard_chunked(input.is_a?(Array) ? input.map(&:b) : input.b)
  end

  # The decoder must give the same answer however the network cuts the input.
  def assert_decodes(input, body, rest = "")
    expected = { body: body.b, rest: rest.b }
    skipped = { data_bytes: body.bytesize, rest: rest.b }
    assert_equal expected, decode(input), "whole: #{input.inspect}"
    assert_equal expected, decode(input.b.chars), "bytewise: #{input.inspect}"
    assert_equal skipped, discard(input), "discard whole: #{input.inspect}"
    assert_equal skipped, discard(input.b.chars), "discard bytewise: #{input.inspect}"
    cuts = (1...input.bytesize).to_a
    cuts = cuts.each_slice(cuts.size / 200 + 1).map(&:first) + cuts.last(20) if cuts.size > 400
    cuts.each do |cut|
      pieces = [input.byteslice(0, cut), input.byteslice(cut..)]
      assert_equal expected, decode(pieces), "split at #{cut}: #{input.inspect}"
      assert_equal skipped, discard(pieces), "discard split at #{cut}: #{input.inspect}"
    end
  end

  def assert_rejected(input)
    assert_equal({ error: true }, decode(input), "whole: #{input.inspect}")
    assert_equal({ error: true }, decode(input.b.chars), "bytewise: #{input.inspect}")
    assert_equal({ error: true }, discard(input), "discard whole: #{input.inspect}")
    assert_equal({ error: true }, discard(input.b.chars), "discard bytewise: #{input.inspect}")
  end

  def test_simple_body
    assert_decodes "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world"
  end

  def test_empty_body
    assert_decodes "0\r\n\r\n", ""
    assert_decodes "000\r\n\r\n", ""
  end

  def test_hex_sizes
    data = "x" * 0x1a
    assert_decodes "1a\r\n#{data}\r\n0\r\n\r\n", data
    assert_decodes "1A\r\n#{data}\r\n0\r\n\r\n", data
    assert_decodes "001A\r\n#{data}\r\n0\r\n\r\n", data
  end

  def test_binary_data_with_crlf_inside
    data = "a\r\n0\r\n\r\n\x00\xff"
    assert_decodes "#{data.bytesize.to_s(16)}\r\n#{data}\r\n0\r\n\r\n", data
  end

  def test_extensions
    assert_decodes "5;name=value\r\nhello\r\n0;last\r\n\r\n", "hello"
    assert_decodes "5;a;b=\"q s\"\t\r\nhello\r\n0\r\n\r\n", "hello"
    assert_decodes "5 ;a\r\nhello\r\n0\t; b\r\n\r\n", "hello"
  end

  def test_trailers_discarded
    assert_decodes "5\r\nhello\r\n0\r\nX-Sum: abc\r\nX-Empty:\r\nX-Tab:\ta b\r\n\r\n", "hello"
  end

  def test_pipelined_rest
    assert_decodes "3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n", "abc", "GET / HTTP/1.1\r\n"
    assert_decodes "0\r\nT: 1\r\n\r\nX", "", "X"
  end

  def test_incomplete
    assert_equal({ incomplete: true, body: "" }, decode(""))
    assert_equal({ incomplete: true, body: "hel" }, decode("5\r\nhel"))
    assert_equal({ incomplete: true, body: "hello" }, decode("5\r\nhello\r\n"))
    assert_equal({ incomplete: true, body: "hello" }, decode(%W[5\r\nhe llo\r\n0\r\n]))
    assert_equal({ incomplete: true, body: "hello" }, decode("5\r\nhello\r\n0\r\nX: y\r\n"))
    assert_equal({ incomplete: true, body: "" }, decode("ffffffff\r\n"))
  end

  def test_discard_incomplete_counts_data_so_far
    assert_equal({ incomplete: true, data_bytes: 0 }, discard(""))
    assert_equal({ incomplete: true, data_bytes: 3 }, discard("5\r\nhel"))
    assert_equal({ incomplete: true, data_bytes: 5 }, discard(%W[5\r\nhe llo\r\n0\r\n]))
    assert_equal({ incomplete: true, data_bytes: 0 }, discard("#{'f' * 15}\r\n"))
  end

  def test_discard_leaves_the_input_alone
    input = +"5\r\nhello\r\n0\r\n\r\nNEXT"
    copy = input.dup
    assert_equal({ data_bytes: 5, rest: "NEXT" }, P.discard_chunked(input))
    assert_equal copy, input
  end

  def test_bad_chunk_sizes
    ["0x5\r\nhello\r\n0\r\n\r\n", "+5\r\nhello\r\n0\r\n\r\n", "-5\r\nhello\r\n0\r\n\r\n",
     " 5\r\nhello\r\n0\r\n\r\n", "\t5\r\nhello\r\n0\r\n\r\n", "\r\nhello\r\n0\r\n\r\n",
     "g\r\n", "5 5\r\nhello\r\n", "5 \r\nhello\r\n0\r\n\r\n", "5\x00\r\nhello\r\n",
     "5\r\r\nhello\r\n", "5\nhello\r\n0\r\n\r\n"].each do |s|
      assert_rejected s
    end
  end

  def test_size_overflow
    assert_rejected "1#{'0' * 15}\r\n"
    assert_rejected "#{'f' * 16}\r\n"
    assert_rejected "000#{'f' * 16}\r\n"
    assert_equal({ incomplete: true, body: "" }, decode("#{'f' * 15}\r\n"))
  end

  # Only significant digits count against the 15 (nginx reads these too);
  # the padding is bounded by the extension budget.
  def test_leading_zeros_are_not_significant
    assert_decodes "#{'0' * 15}5\r\nhello\r\n0\r\n\r\n", "hello"
    assert_decodes "5\r\nhello\r\n#{'0' * 40}\r\n\r\n", "hello"
    assert_equal({ incomplete: true, body: "" }, decode("#{'0' * 20}#{'f' * 15}\r\n"))
    max = P::CHUNK_EXT_MAX
    assert_decodes "#{'0' * (max + 1)}5\r\nhello\r\n0\r\n\r\n", "hello"
    assert_rejected "#{'0' * (max + 2)}5\r\nhello\r\n0\r\n\r\n"
  end

  def test_data_longer_than_size
    assert_rejected "3\r\nhello\r\n0\r\n\r\n"
    assert_rejected "5\r\nhelloX\r\n0\r\n\r\n"
  end

  def test_missing_crlf_after_data
    assert_rejected "5\r\nhello0\r\n\r\n"
    assert_rejected "5\r\nhello\n0\r\n\r\n"
    assert_rejected "5\r\nhello\r0\r\n\r\n"
    assert_rejected "5\r\nhelloX\n0\r\n\r\n"
    assert_rejected "5\r\nhello\n\n0\r\n\r\n"
  end

  def test_bad_extensions
    assert_rejected "5;a\x00\r\nhello\r\n0\r\n\r\n"
    assert_rejected "5;a\x7f\r\nhello\r\n0\r\n\r\n"
    assert_rejected "5;a\nhello\r\n0\r\n\r\n"
    assert_rejected "5;a\rb\r\nhello\r\n0\r\n\r\n"
    assert_rejected "5 x\r\nhello\r\n0\r\n\r\n"
  end

  def test_extension_budget
    max = P::CHUNK_EXT_MAX
    ext = ";#{'e' * (max - 1)}"
    assert_decodes "5#{ext}\r\nhello\r\n0\r\n\r\n", "hello"
    assert_rejected "5#{ext}e\r\nhello\r\n0\r\n\r\n"
    # the budget spans the whole body, not one chunk (CVE-2024-21647)
    many = "1;#{'e' * 1000}\r\nx\r\n" * 17
    assert_rejected "#{many}0\r\n\r\n"
    assert_rejected "5#{' ' * (max + 1)};a\r\nhello\r\n0\r\n\r\n"
  end

  def test_bad_trailers
    ["X : y", " X: y", "X: y\r\n z", ": y", "X", "X: y\x00", "X: a\rb", "X(y: z", "X: y\nZ: w"].each do |t|
      assert_rejected "5\r\nhello\r\n0\r\n#{t}\r\n\r\n"
    end
    assert_rejected "0\r\n\n"
    assert_rejected "0\r\n\r\r\n"
  end

  def test_trailer_budget
    max = P::CHUNK_TRAILER_MAX
    line = "X: #{'t' * (max - 7)}\r\n" # with the final CRLF exactly max bytes
    assert_decodes "0\r\n#{line}\r\n", ""
    assert_rejected "0\r\n#{line.sub('X', 'XY')}\r\n"
    assert_rejected "0\r\n#{"A: b\r\n" * (max / 6 + 1)}\r\n"
  end

  def test_errors_are_sticky
    assert_equal({ error: true }, decode(["x", "0\r\n\r\n"]))
  end

  def test_large_chunks_in_pieces
    data = (0...50_000).map { |i| (i % 251).chr }.join
    body = "#{data.bytesize.to_s(16)}\r\n#{data}\r\n1\r\nz\r\n0\r\n\r\nNEXT"
    pieces = body.b.scan(/.{1,1000}/mn)
    assert_equal({ body: "#{data}z".b, rest: "NEXT" }, decode(pieces))
    assert_equal({ body: "#{data}z".b, rest: "NEXT" }, decode(body))
  end
end
