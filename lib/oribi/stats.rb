# frozen_string_literal: true

require "json"

module Oribi
  # What the control endpoint reports (docs/CONTROL.md): a snapshot the
  # master takes of itself, its listeners and the workers' scoreboard rows,
  # rendered as JSON (/stats) or Prometheus text (/metrics).
  module Stats
    module_function

    # [{uri:, backlog:, backlog_max:}] for listeners still open here.
    def listeners(listeners)
      listeners.all.reject { |l| l.socket.closed? }.map do |l|
        queued, max = Oribi.listen_queue(l.fileno)
        { uri: l.uri, backlog: queued, backlog_max: max }
      end
    end

    # Queue time histogram as cumulative buckets {"0.001" => n, ..., "+Inf" => total}.
    def cumulative(counts)
      les = Scoreboard::QUEUE_BOUNDS.map { |b| format_le(b) } << "+Inf"
      total = 0
      les.zip(counts).to_h { |le, n| [le, total += n] }
    end

    def format_le(b) = (b == b.round ? b.round.to_s : b.to_s)

    # The scoreboard's request lines are the clients' bytes: as text
    # (Log.utf8) like every other string here.
    # The master's report (/stats, /metrics): its workers' rows of the
    # scoreboard (children: Master's records of them), the totals of those
    # gone (retired), the queue-time histogram summed over all.
    def snapshot(children:, scoreboard:, retired:, started_at:, configured:, state:, listening:)
      children = children.sort_by { |s| [s.index, s.started] }
      rss = Platform.rss_of(children.map(&:pid))
      workers = children.map { |child| worker(child, scoreboard.stats(child.row), rss[child.pid]) }
      queue = workers.map { |w| w[:queue] }.reduce(retired[:queue]) { |a, b| a.zip(b).map(&:sum) }
      { pid: Process.pid, version: VERSION, started_at: started_at.to_f.round(3),
        uptime: (Time.now - started_at).round(3), state: state, ready: state == "ready",
        workers_configured: configured, workers_booted: workers.count { |w| w[:booted] && !w[:retiring] },
        requests_total: retired[:served] + workers.sum { |w| w[:served] },
        dropped_headers_total: retired[:dropped_headers] + workers.sum { |w| w[:dropped_headers] },
        listeners: listeners(listening),
        queue_time: { buckets: cumulative(queue), sum: (retired[:queue_sum] + workers.sum { |w| w[:queue_sum] }).round(6),
                      count: queue.sum,
                      from_header: retired[:queue_from_header] + workers.sum { |w| w[:queue_from_header] },
                      header_refused: retired[:queue_header_refused] + workers.sum { |w| w[:queue_header_refused] } },
        workers: workers.map do |w|
          w.except(:queue, :queue_sum, :queue_from_header, :queue_header_refused).merge(queue_count: w[:queue].sum)
        end }
    end

    def worker(child, w, rss)
      { index: child.index, pid: child.pid, generation: w[:generation], booted: !!child.booted,
        retiring: !!child.leaving?, mold: !!child.mold, busy: !w[:busy].nil?, busy_for: w[:busy]&.round(3), request: w[:request],
        served: w[:served], dropped_headers: w[:dropped_headers], io_bound: w[:io_bound], in_app: w[:in_app],
        streams: w[:streams], streams_held: w[:streams_held],
        connections: { active: w[:connections] - w[:idle_connections], idle: w[:idle_connections] },
        last_request_at: w[:last_request_at], rss: rss, queue: w[:queue],
        queue_sum: w[:queue_sum], queue_from_header: w[:queue_from_header],
        queue_header_refused: w[:queue_header_refused] }
    end

    # A worker's counters (a scoreboard row's stats) into the totals of
    # those gone, as it goes.
    def retire(retired, w)
      retired[:served] += w[:served]
      retired[:dropped_headers] += w[:dropped_headers]
      retired[:queue] = retired[:queue].zip(w[:queue]).map(&:sum)
      retired[:queue_sum] += w[:queue_sum]
      retired[:queue_from_header] += w[:queue_from_header]
      retired[:queue_header_refused] += w[:queue_header_refused]
    end

    def json(snapshot) = "#{JSON.pretty_generate(text(snapshot))}\n"

    def text(value)
      case value
      when Hash then value.transform_values { |v| text(v) }
      when Array then value.map { |v| text(v) }
      when String then Log.utf8(value)
      else value
      end
    end

    # Prometheus text exposition format 0.0.4.
    def prometheus(s)
      out = +""
      metric = lambda do |name, type, help, samples|
        out << "# HELP #{name} #{help}\n# TYPE #{name} #{type}\n"
        samples.each do |labels, value|
          next if value.nil?

          l = labels.empty? ? "" : "{#{labels.map { |k, v| "#{k}=\"#{escape(v)}\"" }.join(',')}}"
          out << "#{name}#{l} #{value}\n"
        end
      end
      metric.call("oribi_workers", "gauge", "Worker processes the master keeps running.", [[{}, s[:workers_configured]]])
      metric.call("oribi_workers_booted", "gauge", "Worker processes booted and serving.", [[{}, s[:workers_booted]]])
      metric.call("oribi_ready", "gauge", "1 when /readyz answers 200.", [[{}, s[:ready] ? 1 : 0]])
      metric.call("oribi_requests_total", "counter", "Requests served by all workers, past ones included.",
                  [[{}, s[:requests_total]]])
      live = s[:workers].reject { |w| w[:retiring] }
      per = lambda { |key| live.map { |w| [{ worker: w[:index] }, yield_value(w, key)] } }
      metric.call("oribi_worker_requests_total", "counter", "Requests served by the worker.", per.call(:served))
      metric.call("oribi_response_headers_dropped_total", "counter",
                  "Response header fields the app gave that the Rack SPEC forbids (a nil value, a newline), not sent.",
                  [[{}, s[:dropped_headers_total]]])
      metric.call("oribi_worker_busy", "gauge", "1 while the worker's app runs a request.", per.call(:busy))
      metric.call("oribi_worker_requests_in_app", "gauge",
                  "Requests in the worker's app now: threads busy, or with fibers the requests running as fibers.",
                  per.call(:in_app))
      metric.call("oribi_worker_requests_io_bound", "gauge",
                  "Requests in the worker's app marked as waiting on IO (io_threads).", per.call(:io_bound))
      metric.call("oribi_worker_streams", "gauge",
                  "Responses whose body streams, carried beyond the worker's threads (max_streams).", per.call(:streams))
      metric.call("oribi_worker_streams_held_total", "counter",
                  "Streams that held their app thread because max_streams were open.", per.call(:streams_held))
      metric.call("oribi_worker_connections", "gauge", "Open connections of the worker, by state.",
                  live.flat_map do |w|
                    [[{ worker: w[:index], state: "active" }, w[:connections][:active]],
                     [{ worker: w[:index], state: "idle" }, w[:connections][:idle]]]
                  end)
      metric.call("oribi_worker_last_request_timestamp_seconds", "gauge", "When the worker took its last request.",
                  per.call(:last_request_at))
      metric.call("oribi_worker_rss_bytes", "gauge", "Resident memory of the worker.", per.call(:rss))
      metric.call("oribi_listener_backlog", "gauge", "Connections waiting in the listener's accept queue.",
                  s[:listeners].map { |l| [{ listener: l[:uri] }, l[:backlog]] })
      metric.call("oribi_listener_backlog_max", "gauge", "The listener's accept queue limit.",
                  s[:listeners].map { |l| [{ listener: l[:uri] }, l[:backlog_max]] })
      q = s[:queue_time]
      out << "# HELP oribi_request_queue_seconds Time from accept (or X-Request-Start) to the app.\n" \
             "# TYPE oribi_request_queue_seconds histogram\n"
      q[:buckets].each { |le, n| out << "oribi_request_queue_seconds_bucket{le=\"#{le}\"} #{n}\n" }
      out << "oribi_request_queue_seconds_sum #{q[:sum]}\noribi_request_queue_seconds_count #{q[:count]}\n"
      metric.call("oribi_request_queue_header_refused_total", "counter",
                  "X-Request-Start stamps from trusted peers refused: in the future or long before the server started.",
                  [[{}, q[:header_refused]]])
      out
    end

    def yield_value(w, key)
      v = w[key]
      key == :busy ? (v ? 1 : 0) : v
    end

    def escape(v) = Log.utf8(v).gsub("\\", "\\\\\\\\").gsub("\"", "\\\"").gsub("\n", "\\n")
  end
end
