# frozen_string_literal: true

require "json"
require "oribi/report/chart_library"

module Oribi
  module Bench
    # `--plot FILE`: one self-contained page (uPlot inline, no network
    # fetches) with three charts: latency over time (mean, p50, p99 and max
    # per interval, by send time, log axis), requests and errors per second,
    # and the percentile curve of the run. Hover shows the values, dragging
    # zooms (double click: back), and the two time charts move together.
    module Plot
      module_function

      def data(result, interval, title)
        {
          title: title,
          interval: interval,
          series: (result[:series] || []).each_with_index.map do |s, i|
            { t: (i * interval).round(6), count: s[:count], errors: s[:errors],
              mean: s[:mean]&.round(1), p50: s[:p50], p99: s[:p99], max: s[:max] }
          end,
          percentiles: (result[:percentiles] || []).map { |p, us| [p, us] }
        }
      end

      def html(result, interval:, title: "oribi bench")
        json = JSON.generate(data(result, interval, title)).gsub("</", "<\\/")
        esc = title.gsub("&", "&amp;").gsub("<", "&lt;").gsub(">", "&gt;")
        <<~HTML
          <!DOCTYPE html>
          <html lang="en"><head><meta charset="utf-8"><title>#{esc}</title>
          #{Oribi::Report::ChartLibrary.head}
          <style>
          body { font: 14px system-ui, sans-serif; margin: 2em; color: #222; max-width: 1100px; }
          h2 { font-size: 16px; margin: 1.5em 0 0.3em; } p.note { color: #666; margin: 0 0 0.5em; }
          .chart { margin-bottom: 1em; }
          </style></head><body>
          <h1>#{esc}</h1>
          <h2>Latency over time</h2>
          <p class="note">By send time, per <span id="interval"></span> interval, log scale, timeouts included. Max as dots.
          Drag to zoom, double-click to reset; hover for values.</p>
          <div class="chart" id="latency"></div>
          <h2>Requests and errors per second</h2>
          <div class="chart" id="throughput"></div>
          <h2>Latency by percentile</h2>
          <div class="chart" id="percentiles"></div>
          <script>
          const D = #{json};
          #{SCRIPT}
          </script></body></html>
        HTML
      end

      # The drawing helpers, shared with `oribi tune`'s page (tune/plot.rb):
      # value formats, log and linear scales, grid and labels, a polyline.
      HELPERS = <<~JS
        function fmt(us) {
          if (us >= 1e6) return (us / 1e6).toPrecision(3) + "s";
          if (us >= 1e3) return (us / 1e3).toPrecision(3) + "ms";
          return Math.round(us) + "µs";
        }
        function logScale(lo, hi, a, b) {
          lo = Math.max(1, lo); hi = Math.max(lo * 10, hi);
          const l0 = Math.log10(lo), l1 = Math.log10(hi);
          const f = v => b - (Math.log10(Math.max(v, lo)) - l0) / (l1 - l0) * (b - a);
          f.ticks = [];
          for (let e = Math.floor(l0); e <= Math.ceil(l1); e++) if (e >= l0 - 1e-9 && e <= l1 + 1e-9) f.ticks.push(Math.pow(10, e));
          return f;
        }
        function linScale(hi, a, b) {
          hi = hi > 0 ? hi : 1;
          const raw = hi / 5, mag = Math.pow(10, Math.floor(Math.log10(raw))), n = raw / mag;
          const step = (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * mag; // about 5 round ticks
          const top = Math.ceil(hi / step) * step;
          const f = v => b - v / top * (b - a);
          f.ticks = [];
          for (let v = 0; v <= top + 1e-9; v += step) f.ticks.push(v);
          return f;
        }
        function frame(ctx, W, H, m, y, xlabels, label = fmt) {
          ctx.strokeStyle = "#eee"; ctx.fillStyle = "#555"; ctx.font = "12px sans-serif";
          y.ticks.forEach(v => { const py = y(v); ctx.beginPath(); ctx.moveTo(m.l, py); ctx.lineTo(W - m.r, py); ctx.stroke(); ctx.fillText(label(v), 4, py + 4); });
          xlabels.forEach(([px, text]) => { ctx.fillText(text, px - 10, H - 8); });
        }
        function line(ctx, pts, color) {
          ctx.strokeStyle = color; ctx.lineWidth = 1.5; ctx.beginPath();
          let started = false;
          pts.forEach(([x, v]) => { if (v == null) { started = false; return; } if (!started) { ctx.moveTo(x, v); started = true; } else ctx.lineTo(x, v); });
          ctx.stroke();
        }
      JS

      # Latencies are microseconds; a log axis needs values above 0, so a
      # 0 µs sample is drawn at 1 µs. A log axis is labelled at 1, 2 and 5
      # of each power of ten, so every decade reads without counting lines.
      SCRIPT = <<~JS
        function fmt(us) {
          if (us == null) return "–";
          if (us >= 1e6) return +(us / 1e6).toPrecision(3) + " s";
          if (us >= 1e3) return +(us / 1e3).toPrecision(3) + " ms";
          return +us.toPrecision(3) + " µs";
        }
        const WIDTH = Math.min(1100, document.body.clientWidth || 1000);
        // Grid and labels at 1, 2 and 5 of each power of ten in view.
        function logSplits(u, axis, lo, hi) {
          const out = [];
          for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++)
            [1, 2, 5].forEach(m => { const v = m * Math.pow(10, e); if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v); });
          return out;
        }
        const LABELS = new Set(); // every axis label drawn, for the headless check
        const labels = names => { names.forEach(n => LABELS.add(n)); return names; };
        const logAxis = { label: "latency", size: 70, splits: logSplits, filter: (u, s) => s, values: (u, s) => labels(s.map(fmt)),
                          grid: { stroke: "#eee" }, ticks: { stroke: "#ccc" } };
        function logRange(u, lo, hi) {
          lo = Math.max(1, lo || 1); hi = Math.max(hi || 1, lo * 10);
          return [Math.pow(10, Math.floor(Math.log10(lo))), Math.pow(10, Math.ceil(Math.log10(hi) + 1e-9))];
        }
        // For a headless check: how many charts have drawn, and their labels.
        const drawn = new Set();
        const hooks = { draw: [u => {
          drawn.add(u);
          document.body.dataset.drawn = String(drawn.size);
          document.body.dataset.labels = [...LABELS].join("|");
        }] };
        const sync = uPlot.sync("time");
        const cursor = { sync: { key: sync.key }, drag: { x: true, y: false } };
        const pos = v => v == null ? null : Math.max(1, v);
        const S = D.series, T = S.map(s => s.t);
        document.getElementById("interval").textContent = D.interval + " s";
        const charts = [];
        if (S.length) {
          charts.push(new uPlot({
            width: WIDTH, height: 360, cursor, hooks,
            scales: { x: { time: false }, y: { distr: 3, log: 10, range: logRange } },
            axes: [{ label: "seconds since start" },
                   logAxis],
            series: [{ label: "t", value: (u, v) => v == null ? "–" : v + " s" },
                     { label: "mean", stroke: "#999", width: 1, value: (u, v) => fmt(v) },
                     { label: "p50", stroke: "#1f77b4", width: 1.5, value: (u, v) => fmt(v) },
                     { label: "p99", stroke: "#d62728", width: 2, value: (u, v) => fmt(v) },
                     { label: "max", stroke: "#2ca02c", width: 0, value: (u, v) => fmt(v),
                       paths: () => null, points: { show: true, size: 5, fill: "#2ca02c", stroke: "#2ca02c" } }]
          }, [T, S.map(s => pos(s.mean)), S.map(s => pos(s.p50)), S.map(s => pos(s.p99)), S.map(s => pos(s.max))],
          document.getElementById("latency")));
          const per = n => +(n / D.interval).toFixed(2);
          charts.push(new uPlot({
            width: WIDTH, height: 240, cursor, hooks,
            scales: { x: { time: false }, y: { range: (u, lo, hi) => [0, Math.max(1, hi) * 1.05] } },
            axes: [{ label: "seconds since start" }, { label: "per second", size: 70, grid: { stroke: "#eee" } }],
            series: [{ label: "t", value: (u, v) => v == null ? "–" : v + " s" },
                     { label: "responses/s", stroke: "#1f77b4", width: 1.5, fill: "rgba(31,119,180,0.08)" },
                     { label: "errors/s", stroke: "#d62728", width: 1.5, fill: "rgba(214,39,40,0.15)" }]
          }, [T, S.map(s => per(s.count)), S.map(s => per(s.errors))], document.getElementById("throughput")));
        } else {
          document.getElementById("latency").textContent = "no samples";
        }
        const P = D.percentiles;
        if (P.length) {
          // x is the number of nines: 90% at 1, 99% at 2 … 99.999% at 5; the
          // maximum (100%) sits half a step past the last finite one.
          const nines = p => p >= 100 ? 5.5 : Math.min(5, -Math.log10(1 - p / 100));
          const TICKS = [[0, "0%"], [nines(50), "50%"], [1, "90%"], [2, "99%"], [3, "99.9%"], [4, "99.99%"], [5, "99.999%"], [5.5, "max"]];
          charts.push(new uPlot({
            width: WIDTH, height: 360, hooks,
            cursor: { drag: { x: true, y: false } },
            scales: { x: { time: false, range: [0, 5.75] }, y: { distr: 3, log: 10, range: logRange } },
            axes: [{ label: "percentile", splits: () => TICKS.map(t => t[0]),
                     values: (u, s) => labels(s.map(v => TICKS.find(t => t[0] === v)[1])), grid: { stroke: "#eee" } },
                   logAxis],
            series: [{ label: "percentile", value: (u, v) => v == null ? "–" : P.find(p => nines(p[0]) === v)?.[0] + "%" },
                     { label: "latency", stroke: "#1f77b4", width: 2, value: (u, v) => fmt(v),
                       points: { show: true, size: 6, fill: "#1f77b4" } }]
          }, [P.map(p => nines(p[0])), P.map(p => pos(p[1]))], document.getElementById("percentiles")));
        }
        if (!charts.length) document.body.dataset.drawn = "0";
      JS
    end
  end
end
