# frozen_string_literal: true

# A 100 KiB response: what a server's write path costs once the body is
# larger than a socket buffer.
BODY = ("x" * 102_399 + "\n").freeze
run ->(env) { [200, { "content-type" => "text/plain" }, [BODY]] }
