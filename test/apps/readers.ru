# frozen_string_literal: true

# Large responses for clients that read slowly or not at all:
# /file a to_path body (FILE_MB MiB), /array a 1 MiB Array body (the same
# String every time: what the worker keeps is its write buffers, not the
# app's garbage), /each a body streamed by each (?mb=N MiB, default 4, and
# ?pace=SEC between chunks; each
# MiB chunk is Random.new(i).bytes, so lost or reordered bytes show), / a
# small answer. /each logs "each: chunk N" when chunk N was taken.
# /endless a streaming body (call(stream)) that writes until a write
# fails, then closes its stream in an ensure, as apps do, and logs how
# long that close took.
require "tmpdir"

path = File.join(Dir.mktmpdir("oribi-readers"), "big.bin")
File.binwrite(path, Random.new(7).bytes(Integer(ENV.fetch("FILE_MB", "16"), 10) << 20))
MIB = ("z" * (1 << 20)).freeze

FileBody = Struct.new(:path) do
  def to_path = path
  def each = raise("each called on a to_path body")
end

run lambda { |env|
  case env["PATH_INFO"]
  when "/file" then [200, { "content-type" => "application/octet-stream" }, FileBody.new(path)]
  when "/array" then [200, { "content-type" => "text/plain" }, [MIB]]
  when "/each"
    q = Rack::Utils.parse_query(env["QUERY_STRING"])
    mb = Integer(q.fetch("mb", "4"), 10)
    pace = Float(q.fetch("pace", "0"))
    body = Enumerator.new do |y|
      mb.times do |i|
        y << Random.new(i).bytes(1 << 20)
        warn "each: chunk #{i + 1}"
        sleep pace # the app's own pace (?pace=SEC between chunks)
      end
    end
    [200, { "content-type" => "text/plain" }, body]
  when "/endless"
    body = lambda do |stream|
      loop { stream.write(MIB) }
    ensure
      t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      stream.close
      warn format("endless: close took %.2f s", Process.clock_gettime(Process::CLOCK_MONOTONIC) - t)
    end
    [200, {}, body]
  when "/pid" then [200, { "content-type" => "text/plain" }, [Process.pid.to_s]]
  else [200, { "content-type" => "text/plain" }, ["ok"]]
  end
}
