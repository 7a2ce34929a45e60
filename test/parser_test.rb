# frozen_string_literal: true

require "minitest/autorun"
require "oribi/oribi"
require "rbconfig"
require_relative "support/corpus"

# Oribi::Parser.parse over the C request-head parser: RFC 9112 grammar, the
# status for each kind of bad request (docs/HARDENING.md), limits, and resumable (last_len) parsing.
class ParserTest < Minitest::Test
  P = Oribi::Parser

  def parse(str, last_len = 0, **kw)
    P.parse(str.b, last_len, **kw)
  end

  def req(head, version: "1.1")
    "GET / HTTP/#{version}\r\nHost: example.com\r\n#{head}\r\n"
  end

  def assert_ok(str, **kw)
    r = parse(str, **kw)
    assert r[:consumed], "expected #{str.inspect} to parse, got #{r.inspect}"
    r
  end

  def assert_status(status, str, last_len = 0, **kw)
    r = parse(str, last_len, **kw)
    assert_equal({ error: status }, r.slice(:error, :incomplete), "for #{str.inspect}: #{r.inspect}")
    r
  end

  # Feeds str one byte at a time with last_len, the way a slow socket does.
  def parse_bytewise(str, **kw)
    str = str.b
    last = 0
    (1..str.bytesize).each do |n|
      r = P.parse(str.byteslice(0, n), last, **kw)
      return [r, n] unless r[:incomplete]
      last = n
    end
    [{ incomplete: true }, str.bytesize]
  end

  # ---- valid requests -------------------------------------------------------

  def test_simple_get
    s = "GET /a/b?c=d HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n"
    r = assert_ok(s)
    assert_equal s.bytesize, r[:consumed]
    assert_equal "GET", r[:method]
    assert_equal "/a/b?c=d", r[:target]
    assert_equal "/a/b?c=d", r[:path]
    assert_equal 1, r[:minor_version]
    assert_equal [%w[Host example.com], ["Accept", "*/*"]], r[:headers]
    assert_equal "example.com", r[:host]
    assert_nil r[:content_length]
    refute r[:chunked]
    assert r[:keepalive]
    refute r[:expect_continue]
    refute r[:upgrade]
  end

  def test_consumed_stops_at_end_of_head
    s = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\n"
    r = assert_ok(s)
    assert_equal s.index("hello"), r[:consumed]
    assert_equal 5, r[:content_length]
  end

  def test_ows_trimmed_and_tabs
    r = assert_ok(req("X-A: \t value with  inner \t \r\nX-B:\t\r\nX-C:x\r\n"))
    assert_equal [["X-A", "value with  inner"], ["X-B", ""], ["X-C", "x"]], r[:headers][1..]
  end

  def test_obs_text_in_value_and_target
    r = assert_ok("GET /caf\xC3\xA9 HTTP/1.1\r\nHost: a\r\nX-Name: Ren\xC3\xA9e\r\n\r\n")
    assert_equal "/caf\xC3\xA9".b, r[:path]
    assert_equal "Ren\xC3\xA9e".b, r[:headers][1][1]
  end

  def test_any_token_method
    assert_equal "PURGE", assert_ok("PURGE /x HTTP/1.1\r\nHost: a\r\n\r\n")[:method]
    assert_equal "get", assert_ok("get / HTTP/1.1\r\nHost: a\r\n\r\n")[:method]
    assert_equal "M-SEARCH", assert_ok("M-SEARCH * HTTP/1.1\r\nHost: a\r\n\r\n".sub("*", "/"))[:method]
  end

  def test_http10
    r = assert_ok("GET / HTTP/1.0\r\n\r\n")
    assert_equal 0, r[:minor_version]
    assert_nil r[:host]
    refute r[:keepalive]
    assert assert_ok("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")[:keepalive]
    refute assert_ok("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n")[:keepalive]
  end

  def test_minor_versions_above_one_read_as_one
    %w[1.2 1.5 1.9].each do |v|
      assert_equal 1, assert_ok("GET / HTTP/#{v}\r\nHost: a\r\n\r\n")[:minor_version], v
    end
  end

  def test_leading_crlf_skipped
    r = assert_ok("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
    assert_equal 4 + 27, r[:consumed]
    assert_equal "GET", r[:method]
    assert_ok(("\r\n" * 8) + "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
    assert_status 400, ("\r\n" * 9) + "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_status 400, "\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_status 400, "\rGET / HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_equal({ incomplete: true }, parse("\r\n\r\n"))
    assert_equal({ incomplete: true }, parse("\r"))
  end

  def test_absolute_form
    r = assert_ok("GET http://Example.COM:8080/p?q=1 HTTP/1.1\r\nHost: Example.COM:8080\r\n\r\n")
    assert_equal "http://Example.COM:8080/p?q=1", r[:target]
    assert_equal "/p?q=1", r[:path]
    assert_equal "Example.COM:8080", r[:host]

    r = assert_ok("GET HTTPS://a.test HTTP/1.1\r\nHost: other\r\n\r\n")
    assert_equal "/", r[:path]
    assert_equal "a.test", r[:host], "the authority overrides Host"
    assert_equal [%w[Host other]], r[:headers]

    r = assert_ok("GET http://a?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
    assert_equal "?x=1", r[:path]
    assert_equal "a", r[:host]

    assert_equal "[::1]:80", assert_ok("GET http://[::1]:80/ HTTP/1.0\r\nHost: [::1]\r\n\r\n")[:host]
  end

  # A Host field is needed beside an absolute target, HTTP/1.0 too: a proxy
  # in front matches its rules on the field, never on the target.
  def test_absolute_form_without_host_field
    assert_status 400, "GET http://admin.internal/x HTTP/1.1\r\n\r\n"
    assert_status 400, "GET http://admin.internal/x HTTP/1.0\r\n\r\n"
    assert_status 400, "OPTIONS https://a:443 HTTP/1.0\r\n\r\n"
    assert_equal "a", assert_ok("GET http://a/ HTTP/1.0\r\nHost:\r\n\r\n")[:host]
    assert_nil assert_ok("GET /x HTTP/1.0\r\n\r\n")[:host]
  end

  def test_absolute_form_errors
    assert_status 400, "GET http:// HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_status 400, "GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_status 400, "GET http://user@a/ HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_status 400, "GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_status 400, "GET http:/a/ HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_status 400, "GET http://a b/ HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_status 400, "GET http://a#f HTTP/1.1\r\nHost: a\r\n\r\n"
  end

  # No form of request-target carries a fragment (RFC 9112 3.2); one used
  # to reach the app, where Rack::Lint raised (a 500 instead of a 400).
  def test_fragment_refused
    assert_status 400, "GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_status 400, "GET /a?q=1#frag HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_status 400, "GET http://a/x#frag HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_status 400, "GET /#{'a' * 40}# HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_ok "GET /a%23b HTTP/1.1\r\nHost: a\r\n\r\n"
    # wherever the '#' falls against the wide scan's blocks, and as soon as
    # it arrives (the scan stops at it)
    (0..40).each do |n|
      assert_status 400, "GET /#{'p' * n}#q HTTP/1.0\r\n\r\n"
      assert_status 400, "GET /#{'p' * n}#"
    end
  end

  def test_asterisk_form
    r = assert_ok("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n")
    assert_equal "*", r[:path]
    assert_status 400, "GET * HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_status 400, "options * HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_status 400, "OPTIONS *x HTTP/1.1\r\nHost: a\r\n\r\n"
  end

  def test_authority_form
    r = assert_ok("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
    assert_equal "example.com:443", r[:path]
    refute r[:keepalive], "what follows a CONNECT is a tunnel's, never a request"
    assert_ok "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\nContent-Length: 0\r\n\r\n"
    assert_status 400, "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\nContent-Length: 1\r\n\r\nx"
    assert_status 400, "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    assert_status 400, "CONNECT example.com HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_status 400, "CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_status 400, "CONNECT a:443/x HTTP/1.1\r\nHost: a\r\n\r\n"
    assert_status 400, "GET example.com:443 HTTP/1.1\r\nHost: a\r\n\r\n"
  end

  def test_other_target_forms_rejected
    ["foo", "?a", "a/b", "%2F"].each do |t|
      assert_status 400, "GET #{t} HTTP/1.1\r\nHost: a\r\n\r\n"
    end
  end

  def test_header_names_case_insensitive
    r = assert_ok("POST / HTTP/1.1\r\nhOsT: a\r\nCONTENT-length: 3\r\nconnection: CLOSE\r\n\r\n")
    assert_equal "a", r[:host]
    assert_equal 3, r[:content_length]
    refute r[:keepalive]
  end

  def test_many_headers
    heads = (1..99).map { |i| "X-H#{i}: v#{i}\r\n" }.join
    r = assert_ok(req(heads))
    assert_equal 100, r[:headers].size
    assert_equal %w[X-H99 v99], r[:headers].last
    assert_status 431, req(heads + "X-Last: 1\r\n")
    assert_ok(req(heads + "X-Last: 1\r\n"), max_headers: 101)
    assert_status 431, req("A: 1\r\nB: 2\r\n"), max_headers: 2
  end

  def test_connection_tokens
    r = assert_ok(req("Connection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n"))
    assert r[:upgrade]
    assert r[:keepalive]
    refute assert_ok(req("Connection: upgrade\r\n"))[:upgrade], "needs an Upgrade field too"
    refute assert_ok(req("Upgrade: h2c\r\n"))[:upgrade], "needs the connection option too"
    refute assert_ok("GET / HTTP/1.0\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n")[:upgrade],
           "Upgrade is HTTP/1.1 only (RFC 9110 7.8)"
    refute assert_ok(req("Connection: foo,\tclose ,\r\n"))[:keepalive]
    assert_ok(req("Connection:\r\n"))
    assert_status 400, req("Connection: close;x\r\n")
    assert_status 400, req("Connection: clo se\r\n")
  end

  def test_expect
    s = "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n"
    assert assert_ok(s)[:expect_continue]
    refute assert_ok(s.sub("1.1", "1.0"))[:expect_continue], "ignored in HTTP/1.0 (RFC 9110 10.1.1)"
    r = parse(req("Expect: 200-ok\r\n"))
    assert_equal 417, r[:error]
    assert_equal req("Expect: 200-ok\r\n").bytesize, r[:consumed], "417 keeps the framing"
    assert_equal 417, parse(req("Expect: 100-continue, foo\r\n"))[:error]
    assert_equal 417, parse(req("Expect:\r\n"))[:error]
  end

  def test_417_comes_after_framing_errors
    assert_status 400, req("Expect: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n")
    assert_status 501, req("Expect: x\r\nTransfer-Encoding: gzip\r\n")
    assert_status 400, "GET / HTTP/1.1\r\nExpect: x\r\n\r\n"
  end

  # ---- request line errors --------------------------------------------------

  def test_request_line_grammar
    [
      "GET  / HTTP/1.1", "GET /  HTTP/1.1", " GET / HTTP/1.1", "GET\t/ HTTP/1.1",
      "GET /\tHTTP/1.1", "GET / HTTP/1.1 ", "GET /", "GET / ", "GET", "/ HTTP/1.1",
      "GET / HTTP/1.11", "GET / http/1.1", "GET / HTTP/1", "GET / HTTP/1.", "GET / HTTP/11",
      "GET / HTTP/1.x", "GET / HTTP /1.1", "GET / XTTP/1.1", "G(T / HTTP/1.1", "GET /a\x00 HTTP/1.1",
      "GET /\x7f HTTP/1.1", "GET /\x01 HTTP/1.1", "GET / HTTP/1.1\x00"
    ].each do |line|
      assert_status 400, "#{line}\r\nHost: a\r\n\r\n"
    end
  end

  def test_unsupported_major_versions
    %w[0.9 2.0 3.0 9.1].each do |v|
      assert_status 505, "GET / HTTP/#{v}\r\nHost: a\r\n\r\n"
    end
  end

  def test_request_line_endings
    assert_status 400, "GET / HTTP/1.1\nHost: a\r\n\r\n"
    assert_status 400, "GET / HTTP/1.1\rHost: a\r\n\r\n"
    assert_status 400, "GET / HTTP/1.1\r\r\nHost: a\r\n\r\n"
  end

  # ---- header field errors --------------------------------------------------

  def test_header_field_syntax
    [
      "X: a\rb", "X: a\x00b", "X: \x00", "X: a\x01", "X: a\x7f", "X: a\x1f", "X: a\vb",
      "X : a", "X\t: a", ": a", "X", "X a", "X(: a", "X\"y: a", "X/y: a", "\xC3\xA9: a",
      "X:a\r\n b", "X:a\r\n\tb", " X: a", "\tX: a", "X: a\nY: b"
    ].each do |line|
      assert_status 400, req("#{line}\r\n")
    end
  end

  # With 16 bytes in view a name's end is found by its colon; a byte that
  # is not a token byte before that colon must still refuse the field, and
  # a colon further on must still be found.
  def test_field_names_with_a_block_in_view
    pad = "Pad: #{'p' * 20}\r\n"
    ["X : a", "X\t: a", "X(: a", "X\"y: a", "X/y: a", "X a: b", "\xC3\xA9: a", "X@Y: a", "X\x00: a",
     "#{'n' * 14}\x7f: a", "#{'n' * 14} : a"].each do |line|
      assert_status 400, req("#{line}\r\n#{pad}")
    end
    r = assert_ok(req("Abc:def: x\r\n#{pad}"))
    assert_equal "Abc", r[:headers][1][0]
    assert_equal "def: x", r[:headers][1][1]
    (1..40).each do |n|
      r = assert_ok(req("#{'N' * n}: v#{n}\r\n#{pad}"))
      assert_equal ["N" * n, "v#{n}"], r[:headers][1], "name of #{n} bytes"
    end
  end

  # The usual value (one SP, then bytes up to the CR) skips the trimming
  # loops; every other shape of OWS goes through them.
  def test_value_whitespace_shapes
    {
      "X: a" => "a", "X:a" => "a", "X:  a" => "a", "X: a " => "a", "X: a\t" => "a", "X:\ta" => "a",
      "X: " => "", "X:" => "", "X:  " => "", "X: \t " => "", "X: a b" => "a b", "X: \x80" => "\x80".b
    }.each do |line, value|
      r = assert_ok(req("#{line}\r\nPad: #{'p' * 20}\r\n"))
      assert_equal value, r[:headers][1][1], line.inspect
      r = assert_ok(req("#{line}\r\n"))
      assert_equal value, r[:headers][1][1], "#{line.inspect} last"
    end
  end

  def test_bare_lf_line_ends
    assert_status 400, "GET / HTTP/1.1\r\nHost: a\n\r\n"
    assert_status 400, "GET / HTTP/1.1\r\nHost: a\r\n\n"
    assert_status 400, "GET / HTTP/1.1\nHost: a\n\n"
    assert_status 400, "GET / HTTP/1.1\r\nHost: a\r\n\r\r\n"
  end

  # ---- Host -----------------------------------------------------------------

  def test_host_required_once_in_http11
    assert_status 400, "GET / HTTP/1.1\r\n\r\n"
    assert_status 400, "GET / HTTP/1.1\r\nX-Host: a\r\n\r\n"
    assert_status 400, "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"
    assert_status 400, "GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n"
    assert_status 400, "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"
    assert_status 400, "GET http://a/ HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"
  end

  def test_host_values
    ["a", "a.b-c_d~e", "a:80", "a:", "[::1]", "[::1]:8080", "[::ffff:192.0.2.1]", "192.0.2.1:1", "%41b", "",
     "xn--bcher-kva.example"].each do |h|
      assert_equal h, assert_ok("GET / HTTP/1.1\r\nHost: #{h}\r\n\r\n")[:host], h.inspect
    end
    ["a b", "a/b", "a@b", "u:p@a", "a?b", "a#b", "a:8x", "a:80:80", "[::1", "[]", "a\"", "%4", "%zz", "h\xC3\xA9", "a\\b",
     "[evil.com]", "[evil.com]:80", "[v1.x]", "[fe80::1%25eth0]", "[1234]", "[::g]", ":80", ":"].each do |h|
      assert_status 400, "GET / HTTP/1.1\r\nHost: #{h}\r\n\r\n"
    end
  end

  # Long hosts go through a 16-byte skip on the SIMD paths: a refused byte
  # anywhere in one, at its end, or in a port after it
  def test_long_host_values
    [15, 16, 17, 31, 40].each do |n|
      host = "h" * n
      ["", ":8080", "%41", ".example:1"].each do |tail|
        assert_equal host + tail, assert_ok("GET / HTTP/1.1\r\nHost: #{host}#{tail}\r\n\r\n")[:host]
      end
      ["a b", "@", "\xC3\xA9", "/", "[", "%zz", ":8x", "\""].each do |bad|
        [0, n / 2, n].each do |at|
          h = host.dup.insert(at, bad)
          assert_status 400, "GET / HTTP/1.1\r\nHost: #{h}\r\n\r\n"
        end
      end
    end
  end

  # ---- Content-Length -------------------------------------------------------

  def test_content_length_values
    assert_equal 0, assert_ok(req("Content-Length: 0\r\n"))[:content_length]
    assert_equal 42, assert_ok(req("Content-Length:  042 \r\n"))[:content_length]
    assert_equal 999_999_999_999_999_999, assert_ok(req("Content-Length: #{'9' * 18}\r\n"))[:content_length]
    # leading zeros are no significant digits: only the 18 after them count
    assert_equal 5, assert_ok(req("Content-Length: #{'0' * 30}5\r\n"))[:content_length]
    assert_equal 0, assert_ok(req("Content-Length: #{'0' * 30}\r\n"))[:content_length]
    assert_status 400, req("Content-Length: 00#{'1' * 19}\r\n")
    ["+5", "-1", "0x10", "", "1 2", "5,5", "5, 5", "1e3", "5;", "\xD9\xA3", "1" * 19, "9" * 30].each do |v|
      assert_status 400, req("Content-Length: #{v}\r\n")
    end
  end

  def test_content_length_duplicates
    assert_equal 5, assert_ok(req("Content-Length: 5\r\nContent-Length: 5\r\n"))[:content_length]
    assert_equal 5, assert_ok(req("Content-Length: 5\r\ncontent-length: 05\r\n"))[:content_length]
    assert_status 400, req("Content-Length: 5\r\nContent-Length: 6\r\n")
    assert_status 400, req("Content-Length: 0\r\nContent-Length: \r\n")
  end

  # ---- Transfer-Encoding ----------------------------------------------------

  def test_transfer_encoding_chunked
    r = assert_ok(req("Transfer-Encoding: chunked\r\n"))
    assert r[:chunked]
    assert_nil r[:content_length]
    assert assert_ok(req("Transfer-Encoding:  CHUNKED \r\n"))[:chunked]
    assert assert_ok(req("Transfer-Encoding: ,chunked,\r\n"))[:chunked]
  end

  def test_transfer_encoding_with_content_length
    assert_status 400, req("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n")
    assert_status 400, req("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n")
    assert_status 400, req("Transfer-Encoding: chunked\r\nContent-Length: 0\r\n")
  end

  def test_transfer_encoding_framing_errors
    assert_status 400, req("Transfer-Encoding: chunked, chunked\r\n")
    assert_status 400, req("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n")
    assert_status 400, req("Transfer-Encoding: chunked, gzip\r\n")
    assert_status 400, req("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n")
    assert_status 400, req("Transfer-Encoding: chunked, gzip;q=1\r\n")
    assert_status 400, req("Transfer-Encoding:\r\n")
    assert_status 400, req("Transfer-Encoding: ,\r\n")
    assert_status 400, req("Transfer-Encoding: chunked\r\nTransfer-Encoding:\r\n")
    assert_status 400, req("Transfer-Encoding: \"chunked\"\r\n")
    assert_status 400, req("Transfer-Encoding: chunked gzip\r\n")
    assert_status 400, "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"
  end

  def test_transfer_encoding_unknown_codings
    ["identity", "gzip", "xchunked", "chunkedx", "chunked;x", "chunked ; a=b", "gzip, chunked",
     "deflate,chunked"].each do |te|
      assert_status 501, req("Transfer-Encoding: #{te}\r\n")
    end
    assert_status 501, req("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n")
  end

  # ---- limits ---------------------------------------------------------------

  def test_request_line_limit
    line = "GET /#{'a' * 100} HTTP/1.1\r\n" # LF at index 115
    s = "#{line}Host: a\r\n\r\n"
    assert_ok(s, max_request_line: line.bytesize)
    assert_status 414, s, max_request_line: line.bytesize - 1
    # incomplete: no LF within the limit is already an error
    assert_status 414, "GET /#{'a' * 100}", max_request_line: 50
    assert_equal({ incomplete: true }, parse("GET /#{'a' * 40}", max_request_line: 50))
    assert_status 414, "GET /#{'a' * 9000}"
    assert_status 414, "GET /#{'a' * 9000} HTTP/1.1\r\nHost: a\r\n\r\n"
    # the LF must sit within the limit: as many bytes without one is enough to refuse
    assert_status 414, "GET /#{'a' * 45}", max_request_line: 50
    assert_equal({ incomplete: true }, parse("GET /#{'a' * 44}", max_request_line: 50))
    assert_status 414, "GET /#{'a' * 45}", 49, max_request_line: 50
    # leading empty lines are not part of the request line
    assert_ok("\r\n\r\n#{s}", max_request_line: line.bytesize)
  end

  def test_header_bytes_limit
    s = "GET / HTTP/1.1\r\nHost: a\r\nX: 12345\r\n\r\n"
    hb = s.bytesize - 16
    assert_ok(s, max_header_bytes: hb)
    assert_status 431, s, max_header_bytes: hb - 1
    assert_status 431, "GET / HTTP/1.1\r\nHost: a\r\nX: #{'v' * 100}", max_header_bytes: 64
    assert_equal({ incomplete: true }, parse("GET / HTTP/1.1\r\nHost: a\r\nX: v", max_header_bytes: 64))
    head = "GET / HTTP/1.1\r\n"
    assert_status 431, "#{head}X: #{'v' * 61}", max_header_bytes: 64
    assert_equal({ incomplete: true }, parse("#{head}X: #{'v' * 60}", max_header_bytes: 64))
    assert_status 431, "#{head}X: #{'v' * 61}", 70, max_header_bytes: 64
    assert_status 431, req("X: #{'v' * 70_000}\r\n")
    assert_status 431, "GET / HTTP/1.1\r\nHost: a\r\nX: #{'v' * 70_000}"
  end

  def test_errors_before_the_limit_win
    assert_status 400, "GET  /#{'a' * 100}", max_request_line: 50
    assert_status 400, "GET / HTTP/1.1\r\nHo st: a\r\n#{'x' * 100}", max_header_bytes: 50
  end

  # ---- resumable parsing ----------------------------------------------------

  SAMPLES = [
    "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    "\r\nPOST /submit?x=1 HTTP/1.1\r\nHost: example.com\r\nContent-Length: 11\r\nX-Tab:\tv\t\r\n\r\nhello world",
    "GET http://h.test/a HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: ws\r\n\r\n",
    "OPTIONS * HTTP/1.0\r\n\r\n",
    "PUT /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nExpect: nope\r\n\r\n",
    "GET / HTTP/1.1\nHost: a\n\n",
    "GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
    "GET / HTTP/2.0\r\n\r\n"
  ].freeze

  def test_bytewise_feeding_matches_one_shot
    SAMPLES.each do |s|
      full = parse(s)
      r, n = parse_bytewise(s)
      assert_equal full, r, s.inspect
      if full[:consumed]
        assert_equal full[:consumed], n, "must complete as soon as the head is in: #{s.inspect}"
      end
    end
  end

  # bench/parser_bench.c's request: a browser's, 703 bytes, 9 fields
  BENCH_REQUEST = File.read(File.expand_path("../bench/parser_bench.c", __dir__))
                      .match(/default_request\[\] =\n(.*?);\n/m)[1]
                      .scan(/"((?:[^"\\]|\\.)*)"/).join.gsub("\\r", "\r").gsub("\\n", "\n").b.freeze

  def test_bytewise_feeding_of_bench_request
    s = BENCH_REQUEST
    r, n = parse_bytewise(s)
    assert_equal s.bytesize, r[:consumed]
    assert_equal s.bytesize, n
    assert_equal 9, r[:headers].size
    assert_equal parse(s), r
  end

  def test_resume_waits_for_the_end_of_the_head
    s = "GET  / HTTP/1.1\r\nHost: a\r\n"
    assert_status 400, s # one shot sees the error at once
    assert_equal({ incomplete: true }, parse(s, 5), "a resumed call only looks for the end")
    assert_status 400, "#{s}\r\n", s.bytesize
  end

  def test_resume_bare_lf_gets_400_promptly
    s = "GET / HTTP/1.1\nHost: a\n"
    assert_equal({ incomplete: true }, parse(s, 10))
    assert_status 400, "#{s}\n", s.bytesize
    assert_status 400, "GET / HTTP/1.1\r\nHost: a\n\r\n", 20
  end

  def test_resume_finds_end_split_across_calls
    s = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
    (1...s.bytesize).each do |cut|
      first = parse(s.byteslice(0, cut))
      assert first[:incomplete], "cut #{cut}"
      assert_equal s.bytesize, parse(s, cut)[:consumed], "cut #{cut}"
    end
  end

  def test_resume_applies_limits
    assert_status 414, "GET /#{'a' * 100}", 40, max_request_line: 50
    assert_equal({ incomplete: true }, parse("GET /#{'a' * 40}", 30, max_request_line: 50))
    assert_status 431, "GET / HTTP/1.1\r\nHost: a\r\nX: #{'v' * 100}", 60, max_header_bytes: 64
    assert_status 431, "GET / HTTP/1.1\r\nHost: a\r\nX: #{'v' * 70_000}", 70_000
    r, = parse_bytewise("GET /#{'a' * 100}", max_request_line: 50)
    assert_equal({ error: 414 }, r)
    r, = parse_bytewise("GET / HTTP/1.1\r\nX: #{'v' * 100}", max_header_bytes: 30)
    assert_equal({ error: 431 }, r)
  end

  def test_last_len_past_the_string
    assert_raises(ArgumentError) { P.parse("GET", 4) }
  end

  # ---- SIMD and portable paths agree ------------------------------------------

  AARCH64 = RbConfig::CONFIG["host_cpu"].start_with?("aarch64")

  def test_simd_flag
    assert_includes [true, false], P.simd?
    assert_includes %w[AVX2 SSE4.2 NEON portable], P.path
    assert_equal P.path != "portable", P.simd?
    # NEON is in every aarch64 CPU: nothing to choose at run time
    assert_equal "NEON", P.path if AARCH64 && ENV["ORIBI_NO_NEON"].to_s.empty?
  end

  TCHAR = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".bytes.freeze

  # Every byte in a field name and a field value, early in a line and past
  # the first SIMD block: the classifiers must say what the RFC sets say.
  def every_byte_inputs
    (0..255).flat_map do |b|
      c = b.chr.b
      [req("X#{c}name: v\r\n"), req("#{'x' * 20}#{c}n: v\r\n"),
       req("X: v#{c}w\r\n"), req("X: #{'v' * 35}#{c}w#{'v' * 40}\r\n"),
       "GET /#{'p' * 40}#{c}q HTTP/1.1\r\nHost: a\r\n\r\n"]
    end
  end

  def test_every_byte_in_names_values_and_targets
    (0..255).each do |b|
      c = b.chr.b
      name_ok = TCHAR.include?(b) || b == 0x3a # "X:name: v" is field X
      value_ok = b == 9 || b == 32 || (0x21..0x7e).cover?(b) || b >= 0x80
      target_ok = (0x21..0x7e).cover?(b) && b != 0x23 || b >= 0x80 # '#': no fragments
      [req("X#{c}name: v\r\n"), req("#{'x' * 20}#{c}n: v\r\n")].each do |s|
        assert_equal name_ok, !parse(s)[:consumed].nil?, "name byte #{b} (#{P.path})"
      end
      [req("X: v#{c}w\r\n"), req("X: #{'v' * 35}#{c}w#{'v' * 40}\r\n")].each do |s|
        assert_equal value_ok, !parse(s)[:consumed].nil?, "value byte #{b} (#{P.path})"
      end
      t = "GET /#{'p' * 40}#{c}q HTTP/1.1\r\nHost: a\r\n\r\n"
      assert_equal target_ok, !parse(t)[:consumed].nil?, "target byte #{b} (#{P.path})"
    end
  end

  def test_other_paths_give_identical_results
    inputs = SAMPLES + every_byte_inputs + [
      req("X: #{'v' * 40}\tw\x80\r\nY: #{'z' * 17}\x01\r\n"),
      req("X: #{'v' * 33}\x7f#{'v' * 3}\r\n"),
      req("X:\t #{'v' * 50}\t\t#{'v' * 20} \t\r\n"),
      req("X\x01name: v\r\nPad: #{'p' * 20}\r\n"), req("Abc:def: x\r\nPad: #{'p' * 20}\r\n"),
      req("#{'n' * 15}: v\r\n#{'m' * 16}: w\r\n#{'o' * 17}\x7f: x\r\n"),
      "GET /#{'p' * 47}\x00 HTTP/1.1\r\n\r\n",
      "GET /#{'p' * 31} HTTP/1.1\r\nHost: #{'h' * 64}\r\n\r\n",
      "GET /#{'p' * 9}#q HTTP/1.0\r\n\r\n", "GET /#{'p' * 20}#q HTTP/1.0\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: #{'h' * 20}@#{'h' * 20}\r\n\r\n", "GET / HTTP/1.1\r\nHost: #{'h' * 17}:80\r\n\r\n",
      File.binread(__FILE__).byteslice(0, 300)
    ]
    mine = inputs.map { |s| [parse(s), parse_bytewise(s)] }
    code = <<~RUBY
      require "oribi/oribi"
      inputs = Marshal.load($stdin.binmode.read)
      res = inputs.map do |s|
        last = 0
        inc = nil
        (1..s.bytesize).each do |n|
          inc = [Oribi::Parser.parse(s.byteslice(0, n), last), n]
          break unless inc[0][:incomplete]
          last = n
        end
        [Oribi::Parser.parse(s, 0), inc]
      end
      $stdout.binmode.write(Marshal.dump([Oribi::Parser.path, res]))
    RUBY
    lib = File.expand_path("../lib", __dir__)
    held = AARCH64 ? { "ORIBI_NO_NEON" => "portable" } : { "ORIBI_NO_SSE42" => "portable", "ORIBI_NO_AVX2" => %w[SSE4.2 portable] }
    held.each do |var, want|
      out = IO.popen({ var => "1" }, [RbConfig.ruby, "-I", lib, "-e", code], "r+b") do |io|
        io.write(Marshal.dump(inputs.map(&:b)))
        io.close_write
        io.read
      end
      path, theirs = Marshal.load(out) # rubocop:disable Security/MarshalLoad
      assert_includes Array(want), path, "#{var}=1 must select the #{Array(want).first} path"
      mine.zip(theirs, inputs).each { |a, b, s| assert_equal a, b, "#{var}=1: #{s.inspect}" }
    end
  end
end

# test/corpus/requests.txt is replayed over sockets by the integration tests;
# here each case goes through the parser and the chunked decoder the way a
# connection would, so the corpus and the codec cannot drift apart.
class CorpusTest < Minitest::Test
  P = Oribi::Parser
  CORPUS = File.expand_path("corpus/requests.txt", __dir__)
  BODY_LIMIT = 1_048_576 # the --max-body of the conformance test's server

  def self.cases
    File.read(CORPUS, mode: "rb").split(/^### /).drop(1).map do |chunk|
      header, expect, *lines = chunk.lines(chomp: true)
      lines.shift if lines.first&.start_with?("bodies: ") # checked over sockets only
      [header, expect, lines.join]
    end
  end

  def self.unescape(text) = Corpus.unescape(text)

  # What a connection answers to these bytes: statuses, then :close, :open
  # or :timeout.
  def self.replay(bytes)
    out = []
    loop do
      return out << :open if bytes.empty?

      r = P.parse(bytes)
      return out << :timeout if r[:incomplete]
      if r[:error]
        out << r[:error]
        return out << :close unless r[:error] == 417 && r[:keepalive]

        bytes = bytes.byteslice(r[:consumed]..)
        next
      end
      bytes = bytes.byteslice(r[:consumed]..)
      if r[:chunked]
        d = P.decode_chunked(bytes)
        return out << 400 << :close if d[:error]
        return out << :timeout if d[:incomplete]

        bytes = d[:rest]
      elsif (cl = r[:content_length])
        return out << 413 << :close if cl > BODY_LIMIT
        return out << :timeout if bytes.bytesize < cl

        bytes = bytes.byteslice(cl..)
      end
      out << 200
      return out << :close unless r[:keepalive]
    end
  end

  def self.expected(line)
    words = line.delete_prefix("expect: ").split
    return [:timeout] if words == ["timeout"]

    statuses = words.reject { |w| w == "close" }.map { |w| Integer(w, 10) }
    statuses + [words.last == "close" ? :close : :open]
  end

  def test_format
    cases = self.class.cases
    assert_operator cases.size, :>=, 80
    names = cases.map { |h, _, _| h[/\A[a-z0-9-]+(?=: )/] }
    assert_equal [], cases.map(&:first).zip(names).reject { |_, n| n }.map(&:first), "name: description"
    assert_equal names.uniq, names, "names must be unique"
    cases.each do |h, e, text|
      assert_match(/\Aexpect: (timeout|(\d{3} )*(\d{3})( close)?)\z/, e, h)
      refute_empty text, h
    end
  end

  def test_covers_every_reaction
    got = self.class.cases.map { |_, e, _| e }.uniq
    ["expect: 200", "expect: 200 close", "expect: 200 200", "expect: 400 close", "expect: 414 close",
     "expect: 431 close", "expect: 501 close", "expect: 505 close", "expect: 417", "expect: 413 close",
     "expect: timeout"].each { |e| assert_includes got, e }
  end

  def test_codec_agrees_with_every_case
    self.class.cases.each do |h, e, text|
      bytes = self.class.unescape(text)
      assert_equal self.class.expected(e), self.class.replay(bytes), "#{h[0, 100]}\n#{bytes[0, 200].inspect}"
    end
  end
end
