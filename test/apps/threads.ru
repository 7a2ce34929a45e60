# frozen_string_literal: true

# For threads_test: ?sleep=SECONDS sleeps (saying so on stderr first), /flags
# tells rack.multithread, /stream streams in three writes, /hijack answers
# on the hijacked socket.
run lambda { |env|
  case env["PATH_INFO"]
  when "/flags"
    [200, {}, ["multithread=#{env['rack.multithread']}"]]
  when "/stream"
    [200, {}, proc { |io| 3.times { |i| io.write("part#{i}\n") && sleep(0.05) } && io.close }]
  when "/hijack"
    io = env["rack.hijack"].call
    sleep 0.05
    io.write("HTTP/1.1 200 OK\r\ncontent-length: 7\r\nconnection: close\r\n\r\nhijack\n")
    io.close
    [-1, {}, []]
  else
    secs = env["QUERY_STRING"][/sleep=([\d.]+)/, 1].to_f
    if secs >= 0.1
      $stderr.puts "sleeping #{secs} #{env['PATH_INFO']}"
    end
    sleep secs if secs.positive?
    [200, { "content-type" => "text/plain" }, ["#{env['PATH_INFO']} slept #{secs}\n"]]
  end
}
