# frozen_string_literal: true

# The app bench/soak.rb runs under load: answers GETs, reads and sums POST
# bodies (in memory or spilled to a tmpfile), and fails on /error with an
# exception (the server's 500).
run lambda { |env|
  case env["PATH_INFO"]
  when "/error" then raise "soak: the app fails on purpose"
  when "/post"
    input = env["rack.input"]
    n = 0
    while (chunk = input.read(65_536))
      n += chunk.bytesize
    end
    [200, { "content-type" => "text/plain" }, ["#{n}\n"]]
  else
    [200, { "content-type" => "text/plain" }, ["hello\n"]]
  end
}
