# frozen_string_literal: true

require "rack3_helper"

# Bodies that respond to to_path go out with sendfile(2); their each must
# not be called (the test app's raises).
class SendfileTest < Minitest::Test
  include SharedServer
  server "rack3.ru", env: Rack3Files.server_env

  def get(sock, path, method: "GET")
    sock.write("#{method} #{path} HTTP/1.1\r\nHost: t\r\n\r\n")
    HTTPClient.read_response(sock, timeout: 20, head: method == "HEAD")
  end

  def test_file_bodies_arrive_whole_with_their_length_on_both_transports
    server.each_transport do |name, open|
      s = open.call
      { "small.bin" => Rack3Files::SMALL, "large.bin" => Rack3Files::LARGE, "empty.bin" => "" }.each do |file, data|
        res = get(s, "/file?name=#{file}")
        assert_equal 200, res.status, "#{name} #{file}"
        assert_equal data.bytesize.to_s, res["content-length"]
        assert_nil res["transfer-encoding"]
        assert_equal Digest::MD5.hexdigest(data), Digest::MD5.hexdigest(res.body), "#{name} #{file}"
      end
      assert_equal 200, get(s, "/pid").status, "#{name}: keep-alive after files"
      s.close
    end
    refute_match(/each called/, server.log)
  end

  # Rails' send_file gives a to_path that is a Pathname: sent as a file
  # (its length known, no chunking, each never called), as a String is.
  def test_a_to_path_that_is_a_pathname_or_converts_to_a_string_is_sent_as_the_file
    s = server.tcp
    { "/nolint/file-pathname" => Rack3Files::LARGE, "/nolint/file-to-str" => Rack3Files::SMALL }.each do |path, data|
      res = get(s, path)
      assert_equal 200, res.status, path
      assert_equal data.bytesize.to_s, res["content-length"], path
      assert_nil res["transfer-encoding"], path
      assert_equal Digest::MD5.hexdigest(data), Digest::MD5.hexdigest(res.body), path
    end
    refute_match(/each called/, server.log)
  ensure
    s&.close
  end

  def test_head_gives_the_file_length_and_no_body
    s = server.tcp
    res = get(s, "/file?name=large.bin", method: "HEAD")
    assert_equal Rack3Files::LARGE.bytesize.to_s, res["content-length"]
    assert_equal "", res.body
    assert_equal 200, get(s, "/pid").status, "the next response starts right after the head"
  ensure
    s&.close
  end

  def test_the_apps_shorter_content_length_cuts_the_file
    s = server.tcp
    res = get(s, "/file-length?name=small.bin&len=100")
    assert_equal "100", res["content-length"]
    assert_equal Rack3Files::SMALL[0, 100], res.body
    assert_equal 200, get(s, "/pid").status
  ensure
    s&.close
  end

  def test_the_apps_longer_content_length_closes_the_connection
    s = server.tcp
    s.write("GET /file-length?name=small.bin&len=6000 HTTP/1.1\r\nHost: t\r\n\r\n")
    data = +""
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    while (c = HTTPClient.read_some(s, 65_536, deadline))
      data << c
    end
    assert_match(/content-length: 6000\r\n/, data)
    assert data.end_with?("\r\n\r\n" + Rack3Files::SMALL), "the file, then the close"
  ensure
    s&.close
  end

  def test_body_is_closed_and_no_descriptor_leaks
    # Counted with this connection open: a keep-alive connection may hold
    # two fds (the kqueue build through libkqueue), and one still open
    # elsewhere would be counted or not by chance.
    s = server.unix
    pid = get(s, "/pid").body.to_i
    before = Dir.children("/proc/#{pid}/fd").size
    20.times { assert_equal 200, get(s, "/file?name=small.bin").status }
    s.close
    assert_match(/file body closed small.bin/, server.log_until(/file body closed/))
    wait_until { Dir.children("/proc/#{pid}/fd").size <= before }
    assert_operator Dir.children("/proc/#{pid}/fd").size, :<=, before
  end

  def test_rack_files_under_lint
    s = server.tcp
    res = get(s, "/files/large.bin")
    assert_equal 200, res.status, res.body[0, 200]
    assert_equal Digest::MD5.hexdigest(Rack3Files::LARGE), Digest::MD5.hexdigest(res.body)
    ranged = HTTPClient.request(s, "/files/small.bin", headers: { "Range" => "bytes=10-19" })
    assert_equal 206, ranged.status # Rack::Files' range body has no to_path
    assert_equal Rack3Files::SMALL[10, 10], ranged.body
  ensure
    s&.close
  end

  def test_to_path_naming_no_file_falls_back_to_each
    res = get(server.tcp, "/nolint/file-missing")
    assert_equal "from each", res.body
  end

  def test_a_client_that_stops_reading_is_dropped_after_the_write_timeout
    write_timeout = 3
    srv = ServerProcess.new("rack3.ru", "--write-timeout", write_timeout.to_s, env: Rack3Files.server_env, unix: false)
    before = sockets(srv.pid)
    stuck = srv.tcp
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    stuck.write("GET /file?name=huge.bin HTTP/1.1\r\nHost: t\r\n\r\n")
    stuck.readpartial(100) # the response started; now it stalls
    other_sock = srv.tcp
    other = HTTPClient.request(other_sock, "/pid") # the loop sends the file: the one app thread is free
    other_sock.close
    assert_equal 200, other.status
    # an app thread stuck in the write would be free only at the write timeout
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :<, write_timeout
    assert wait_until(timeout: 10) { sockets(srv.pid) <= before }, "the stalled client was dropped"
    # what the kernel had queued arrives, then the close: not the whole file
    received = 0
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
    while (c = HTTPClient.read_some(stuck, 1 << 20, deadline))
      received += c.bytesize
    end
    assert_operator received, :<, 256 * 1024 * 1024
    assert_match(/file body closed huge.bin/, srv.log_until(/huge.bin/))
  ensure
    stuck&.close
    srv&.stop
  end

  private

  # Distinct sockets the server holds: the listener (its copies are one)
  # and the connections. Not all fds: the loop opens some on first use.
  def sockets(pid)
    Dir.children("/proc/#{pid}/fd").filter_map do |f|
      File.readlink("/proc/#{pid}/fd/#{f}")
    rescue Errno::ENOENT
      nil # closed meanwhile
    end.grep(/\Asocket:/).uniq.size
  end
end
