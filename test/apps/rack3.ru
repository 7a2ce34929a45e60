# frozen_string_literal: true

# Rack 3 response features, each path a case: streaming bodies, to_path
# bodies, early hints, rack.response_finished. Served under Rack::Lint
# except under /nolint (cases that break SPEC on purpose). Files come from
# $ORIBI_TEST_FILES. What the app sees is logged to stderr for the tests.
require "rack"
require "pathname"

FILES = ENV.fetch("ORIBI_TEST_FILES")

# A rackup file's top-level defs belong to the builder; classes need a module.
module Notes
  def self.note(msg) = $stderr.write("note: #{msg}\n")
end

# A file body whose each must never run: the server has to use to_path.
class FileBody
  def initialize(path) = @path = path
  def to_path = @path
  def each = raise("each called on a to_path body")
  def close = Notes.note("file body closed #{File.basename(@path)}")
end

# An each body of many chunks: a client that leaves mid-way stops it.
class ManyChunks
  def each
    10_000.times { yield "z" * 65_536 }
  end
end

def finished_logger(tag)
  lambda do |env, status, _headers, error|
    Notes.note("finished #{tag} #{env['PATH_INFO']} #{status} #{error ? error.class : 'nil'}")
  end
end

app = lambda do |env|
  q = Rack::Utils.parse_query(env["QUERY_STRING"])
  path = env["PATH_INFO"]
  env["rack.response_finished"] << finished_logger("log") if q["log"]
  case path
  when "/stream"
    [200, { "content-type" => "text/plain" }, lambda { |s|
      Notes.note("stream called #{env['REQUEST_METHOD']}")
      s.write("hello ")
      s.flush
      s << "world"
    }]
  when "/stream-length"
    [200, { "content-length" => "11" }, ->(s) { s.write("hello", " ", "world") }]
  when "/stream-echo" # reads what the client sends after the request
    [200, {}, lambda { |s|
      2.times { s.write("got #{s.read(4)};") }
    }]
  when "/stream-close"
    [200, {}, lambda { |s|
      s.write("a")
      s.close_write
      closed_after_write = s.closed?
      s.close
      begin
        s.write("b")
        after = "no error"
      rescue IOError => e
        after = e.class.name
      end
      Notes.note("stream closed? #{closed_after_write} #{s.closed?} write after close: #{after}")
    }]
  when "/stream-raise"
    [200, {}, lambda { |s|
      s.write("partial")
      raise "stream failed"
    }]
  when "/stream-forever" # until the client goes away
    [200, {}, ->(s) { loop { s.write("y" * 65_536) } }]
  when "/file"
    [200, { "content-type" => "application/octet-stream" }, FileBody.new(File.join(FILES, q["name"]))]
  when "/file-length"
    [200, { "content-length" => q["len"] }, FileBody.new(File.join(FILES, q["name"]))]
  when "/hints"
    if (hints = env["rack.early_hints"])
      hints.call({ "link" => "</style.css>; rel=preload; as=style" })
      hints.call({ "link" => ["</a.js>; rel=preload", "</b.js>; rel=preload"] })
      [200, { "content-type" => "text/plain" }, ["final"]]
    else
      [200, { "content-type" => "text/plain" }, ["no hints"]]
    end
  when "/hints-late" # too late once the head is out: nothing is sent
    hints = env["rack.early_hints"]
    [200, {}, lambda { |s|
      hints.call({ "link" => "</late.css>" })
      s.write("body")
    }]
  when "/finished"
    env["rack.response_finished"] << finished_logger("a")
    env["rack.response_finished"] << ->(*) { raise "callback boom" }
    [200, { "content-type" => "text/plain" }, ["done"]]
  when "/finished-raise"
    env["rack.response_finished"] << finished_logger("r")
    raise "app failed"
  when "/finished-gone"
    env["rack.response_finished"] << finished_logger("g")
    [200, {}, ManyChunks.new]
  when "/pid"
    [200, {}, [Process.pid.to_s]]
  else
    [404, {}, ["not found"]]
  end
end

# Rack::Files as it is used in real apps: to_path through Lint.
map("/files") { run Rack::Lint.new(Rack::Files.new(FILES)) }
map("/nolint") do
  run lambda { |env|
    case env["PATH_INFO"]
    when "/file-missing" # to_path names no file: the server falls back to each
      body = Object.new
      def body.to_path = "/nonexistent/oribi"
      def body.each = yield("from each")
      [200, {}, body]
    when "/file-pathname" # Rails' send_file Rails.root.join(...): to_path is a Pathname
      [200, {}, FileBody.new(Pathname(File.join(FILES, "large.bin")))]
    when "/file-to-str" # anything File.open takes: to_str
      path = Object.new
      path.define_singleton_method(:to_str) { File.join(FILES, "small.bin") }
      [200, {}, FileBody.new(path)]
    when "/early-hints-http10"
      [200, {}, [env.key?("rack.early_hints").to_s]]
    when "/hints-flood" # ?n= hints of 1 KiB each, to a client that may not read them
      pad = "x" * 1000
      Integer(env["QUERY_STRING"][/n=(\d+)/, 1]).times { |i| env["rack.early_hints"].call({ "link" => "</#{i}#{pad}>" }) }
      $stderr.puts "hints flood done"
      [200, {}, ["flooded"]]
    when "/hints-bad" # checked like the final response's fields
      env["rack.early_hints"].call({ "x-bad" => "a\r\nInjected: 1", "link" => "</ok.css>", "connection" => "close" })
      env["rack.early_hints"].call({ "x-bad" => "only bad\n" }) # nothing left: no 103 at all
      [200, {}, ["after bad hints"]]
    else
      [404, {}, []]
    end
  }
end
map("/") { run Rack::Lint.new(app) }
