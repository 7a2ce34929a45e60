# frozen_string_literal: true

require "json"
require "oribi/bench/plot"
require "oribi/tune/report"

module Oribi
  module Tune
    # The HTML report: one self-contained page (drawing code inline, the
    # helpers shared with `oribi bench --plot`) with the table, the
    # recommendation, throughput and p99 against threads (one line per
    # worker count) and RSS per setting.
    module Plot
      module_function

      def html(run, title: "oribi tune")
        json = JSON.generate(Report.document(run)).gsub("</", "<\\/")
        esc = ->(s) { s.gsub("&", "&amp;").gsub("<", "&lt;").gsub(">", "&gt;") }
        <<~HTML
          <!DOCTYPE html>
          <html lang="en"><head><meta charset="utf-8"><title>#{esc.(title)}</title>
          <style>
          body { font: 14px system-ui, sans-serif; margin: 2em; color: #222; }
          canvas { border: 1px solid #ddd; display: block; margin: 0.5em 0 2em; }
          pre { background: #f6f6f6; padding: 1em; overflow-x: auto; }
          .key span { margin-right: 1.5em; } .key b { display: inline-block; width: 1em; height: 3px; vertical-align: middle; margin-right: 0.3em; }
          </style></head><body>
          <h1>#{esc.(title)}</h1>
          <pre>#{esc.(Report.text(run))}</pre>
          <h2>Highest rate within the SLO vs threads</h2>
          <div class="key" id="key-throughput"></div>
          <canvas id="throughput" width="1000" height="360"></canvas>
          <h2>p99 at that rate vs threads (log scale)</h2>
          <div class="key" id="key-p99"></div>
          <canvas id="p99" width="1000" height="360"></canvas>
          <h2>RSS per setting (dark: master, light: workers; dashed: --memory-limit)</h2>
          <canvas id="rss" width="1000" height="360"></canvas>
          <script>
          const D = #{json};
          #{Bench::Plot::HELPERS}
          #{SCRIPT}
          </script></body></html>
        HTML
      end

      SCRIPT = <<~JS
        const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
        const S = D.settings.filter(s => s.workers != null);
        const THREADS = [...new Set(S.map(s => s.threads))].sort((a, b) => a - b);
        const WORKERS = [...new Set(S.map(s => s.workers))].sort((a, b) => a - b);
        const M = { l: 70, r: 20, t: 10, b: 30 };
        const MIB = 1048576;
        function mib(v) { return v >= 1024 ? (v / 1024).toPrecision(3) + "GiB" : Math.round(v) + "MiB"; }
        function byThreads(id, value, scale, label) {
          const c = document.getElementById(id), ctx = c.getContext("2d"), W = c.width, H = c.height;
          const vals = S.map(value).filter(v => v != null);
          if (!vals.length) { ctx.fillText("no setting met the SLO", W / 2, H / 2); return; }
          const y = scale(vals, M.t, H - M.b);
          const x = t => M.l + (THREADS.indexOf(t) + 0.5) / THREADS.length * (W - M.l - M.r);
          frame(ctx, W, H, M, y, THREADS.map(t => [x(t), t + " thr"]), label);
          WORKERS.forEach((w, i) => {
            const pts = THREADS.map(t => S.find(s => s.workers === w && s.threads === t)).map(s => [x(s ? s.threads : 0), s && value(s) != null ? y(value(s)) : null]);
            line(ctx, pts, PALETTE[i % PALETTE.length]);
            ctx.fillStyle = PALETTE[i % PALETTE.length];
            pts.forEach(([px, py]) => { if (py != null) { ctx.beginPath(); ctx.arc(px, py, 3, 0, 7); ctx.fill(); } });
          });
          document.getElementById("key-" + id).innerHTML = WORKERS.map((w, i) => `<span><b style="background:${PALETTE[i % PALETTE.length]}"></b>${w} worker${w === 1 ? "" : "s"}</span>`).join("");
        }
        byThreads("throughput", s => s.max_rate, (v, a, b) => linScale(Math.max(...v), a, b), v => Math.round(v) + "/s");
        byThreads("p99", s => s.max_rate == null ? null : s.latency_ms.p99 * 1000, (v, a, b) => logScale(Math.min(...v), Math.max(...v), a, b));
        (function rssChart() {
          const c = document.getElementById("rss"), ctx = c.getContext("2d"), W = c.width, H = c.height;
          const R = S.filter(s => s.memory_bytes);
          if (!R.length) { ctx.fillText("no memory measured", W / 2, H / 2); return; }
          const y = linScale(Math.max(...R.map(s => s.memory_bytes.total_rss), D.memory_limit_bytes || 0) / MIB, M.t, H - M.b);
          const bw = (W - M.l - M.r) / R.length, x = i => M.l + (i + 0.5) * bw;
          frame(ctx, W, H, M, y, R.map((s, i) => [x(i) - 10, s.workers + "w×" + s.threads + "t"]), mib);
          R.forEach((s, i) => {
            const m = s.memory_bytes, top = y(m.total_rss / MIB), mid = y(m.master_rss / MIB);
            ctx.fillStyle = "#aec7e8"; ctx.fillRect(x(i) - bw * 0.3, top, bw * 0.6, mid - top);
            ctx.fillStyle = "#1f77b4"; ctx.fillRect(x(i) - bw * 0.3, mid, bw * 0.6, H - M.b - mid);
            ctx.fillStyle = "#222"; ctx.fillText(mib(m.total_rss / MIB), x(i) - 20, top - 4);
          });
          if (D.memory_limit_bytes) {
            const py = y(D.memory_limit_bytes / MIB);
            ctx.strokeStyle = "#d62728"; ctx.setLineDash([6, 4]); ctx.beginPath(); ctx.moveTo(M.l, py); ctx.lineTo(W - M.r, py); ctx.stroke(); ctx.setLineDash([]);
            ctx.fillStyle = "#d62728"; ctx.fillText("memory limit " + mib(D.memory_limit_bytes / MIB), W - M.r - 160, py - 4);
          }
        })();
      JS
    end
  end
end
