# frozen_string_literal: true

require "minitest/autorun"
require "oribi/oribi"

# Oribi::Parser.parse_response over the C response-head parser: what the
# load generator and `oribi ctl` frame responses with. Every verdict must
# be the same on the whole input and on each prefix that already decides.
class ResponseHeadTest < Minitest::Test
  P = Oribi::Parser

  def parse(str, head: false)
    P.parse_response(str.b, head: head)
  end

  # A prefix is incomplete or already gives the final answer.
  def assert_prefixes(str, head: false)
    whole = parse(str, head: head)
    (0...str.bytesize).each do |n|
      got = parse(str.byteslice(0, n), head: head)
      next if got == { incomplete: true }

      assert_equal whole, got, "prefix of #{n}: #{str.inspect}"
    end
    whole
  end

  def assert_head(str, head: false, **expected)
    r = assert_prefixes(str, head: head)
    refute r[:error] || r[:incomplete], "#{str.inspect}: #{r.inspect}"
    expected.each { |k, v| v.nil? ? assert_nil(r[k], k) : assert_equal(v, r[k], "#{k} of #{str.inspect}") }
    r
  end

  def assert_bad(str, head: false)
    assert_equal({ error: true }, assert_prefixes(str, head: head), str.inspect)
  end

  def test_content_length
    r = assert_head("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
                    status: 200, reason: "OK", minor_version: 1, content_length: 5,
                    framing: :length, keepalive: true)
    assert_equal 64, r[:consumed]
    assert_equal [["Content-Type", "text/plain"], ["Content-Length", "5"]], r[:headers]
    assert_head "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", framing: :length, content_length: 0
    assert_head "HTTP/1.1 200 OK\r\nContent-Length: 7\r\ncontent-length: 7\r\n\r\n", content_length: 7
  end

  def test_chunked_and_until_close
    assert_head "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", framing: :chunked,
                                                                          content_length: nil, keepalive: true
    assert_head "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", framing: :chunked
    assert_head "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked;x=1\r\n\r\n",
                framing: :chunked
    # Transfer-Encoding wins over Content-Length (RFC 9112 6.3)
    assert_head "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
                framing: :chunked, content_length: nil
    # chunked followed by another coding: the body runs to the close
    assert_head "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", framing: :until_close,
                                                                                keepalive: false
    assert_head "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n", framing: :until_close, keepalive: false
  end

  def test_no_body_for_1xx_204_304_and_head
    assert_head "HTTP/1.1 100 Continue\r\n\r\n", status: 100, framing: :none
    assert_head "HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n", framing: :none
    assert_head "HTTP/1.1 204 No Content\r\n\r\n", framing: :none, keepalive: true
    assert_head "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", framing: :none, content_length: 10
    assert_head "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", head: true, framing: :none,
                                                                   content_length: 1000, keepalive: true
    assert_head "HTTP/1.1 200 OK\r\n\r\n", head: true, framing: :none, keepalive: true
    # a coding we do not know closes the connection even without a body
    assert_head "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", head: true, framing: :none,
                                                                        keepalive: false
  end

  def test_keepalive
    assert_head "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", keepalive: false
    assert_head "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
                framing: :chunked, keepalive: false
    assert_head "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", minor_version: 0, keepalive: false
    assert_head "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", keepalive: true
    assert_head "HTTP/1.1 200 OK\r\nConnection: keep-alive, Upgrade\r\nContent-Length: 0\r\n\r\n",
                keepalive: true
  end

  def test_status_line_forms
    assert_head "HTTP/1.1 200\r\n\r\n", status: 200, reason: ""
    assert_head "HTTP/1.1 200 \r\n\r\n", reason: ""
    assert_head "HTTP/1.1 599 Custom \t reason\xff\r\n\r\n", status: 599, reason: "Custom \t reason\xff".b
    assert_head "HTTP/1.1 404 Not Found\r\nX-Empty:\r\nX-Tab:\t a \t\r\n\r\n",
                headers: [%w[X-Empty], %w[X-Tab a]].map { |n, v| [n, v.to_s] }
  end

  def test_bad_status_lines
    ["hello there\r\n\r\n", "HTTP/2.0 200 OK\r\n\r\n", "HTTP/1.2 200 OK\r\n\r\n", "http/1.1 200 OK\r\n\r\n",
     "HTTP/1.1 20 OK\r\n\r\n", "HTTP/1.1 2000 OK\r\n\r\n", "HTTP/1.1 099 Low\r\n\r\n", "HTTP/1.1 600 OK\r\n\r\n",
     "HTTP/1.1  200 OK\r\n\r\n", "HTTP/1.1 200 O\x00K\r\n\r\n", "HTTP/1.1 200 OK\n\r\n", "HTTP/1.1 200 OK\r\r\n\r\n",
     " HTTP/1.1 200 OK\r\n\r\n", "\r\nHTTP/1.1 200 OK\r\n\r\n"].each { |s| assert_bad s }
  end

  def test_garbage_fails_before_the_empty_line
    assert_equal({ error: true }, parse("GET / HTTP/1.1\r\n"))
    assert_equal({ error: true }, parse("HTTP/1.3"))
    assert_equal({ error: true }, parse("HTTP/1.1 200 OK\nContent-Length: 2")) # bare LF
    assert_equal({ incomplete: true }, parse("HTTP/1.1 200 OK\r\nContent-Le"))
    assert_equal({ incomplete: true }, parse(""))
  end

  def test_bad_fields
    ["X: a\r\n b", "X : a", " X: a", ": a", "X", "X: a\x00b", "X: a\rb", "X: a\nY: b", "X(: a"].each do |f|
      assert_bad "HTTP/1.1 200 OK\r\n#{f}\r\nContent-Length: 0\r\n\r\n"
    end
  end

  def test_bad_framing
    ["Content-Length: 2\r\nContent-Length: 3", "Content-Length: 2, 2", "Content-Length: +2",
     "Content-Length: -1", "Content-Length: ", "Content-Length: 99999999999999999999",
     "Content-Length: 1e3", "Transfer-Encoding: chunked x", "Transfer-Encoding: \"chunked\"",
     "Connection: close x"].each do |f|
      assert_bad "HTTP/1.1 200 OK\r\n#{f}\r\n\r\n"
    end
    # the largest length accepted: 18 digits
    assert_head "HTTP/1.1 200 OK\r\nContent-Length: #{'9' * 18}\r\n\r\n", content_length: (10**18) - 1
  end

  def test_header_capacity
    many = "HTTP/1.1 200 OK\r\n#{"X: y\r\n" * P::DEFAULT_MAX_HEADERS}\r\n"
    assert_equal P::DEFAULT_MAX_HEADERS, parse(many)[:headers].size
    assert_equal({ error: true }, parse(many.sub("\r\n\r\n", "\r\nZ: 1\r\n\r\n")))
  end

  def test_only_the_head_is_read
    r = parse("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n\x00\n garbage")
    assert_equal 38, r[:consumed]
    # two heads back to back (an interim response, then the final one)
    two = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    first = parse(two)
    assert_equal 100, first[:status]
    assert_equal 200, parse(two.byteslice(first[:consumed]..))[:status]
  end
end
