# frozen_string_literal: true

# Answers with the class of Rack's default query parser and what
# Rack::Request made of the query string and form body (inspect), or the
# class and message of the error it raised.
run lambda { |env|
  req = Rack::Request.new(env)
  parser = Rack::Utils.default_query_parser
  body = begin
    "#{parser.class} #{parser.param_depth_limit}\n#{req.GET.inspect}\n#{req.POST.inspect}"
  rescue StandardError => e
    "#{parser.class} #{parser.param_depth_limit}\n#{e.class}: #{e.message}"
  end
  [200, { "content-type" => "text/plain" }, [body]]
}
