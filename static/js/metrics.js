/* The metrics page: the measures with their trends, and the charts over time.
 *
 * Reads GET /api/metrics and GET /api/metrics/history (the session is the credential)
 * for the window and workflow the page was opened with, draws the charts with uPlot
 * (static/vendor/uplot), and does it again every data-poll-ms. No inline script, no
 * eval: it runs under the site's CSP.
 */
(function () {
  "use strict";

  var COLORS = ["#2447b8", "#1e7d45", "#c0392b", "#8a5a00", "#7b3fa0", "#00838f", "#a24a00", "#5a6275"];
  var STATUS_COLORS = { started: "#2447b8", completed: "#1e7d45", failed: "#c0392b", cancelled: "#8a8f9c" };
  var charts = {};

  function el(id) {
    return document.getElementById(id);
  }

  function fmtRate(v) {
    return v === null || v === undefined ? "—" : (v * 100).toFixed(1) + "%";
  }

  function fmtMs(v) {
    if (v === null || v === undefined) return "—";
    return v >= 1000 ? (v / 1000).toFixed(2) + " s" : Math.round(v) + " ms";
  }

  function fmtSeconds(v) {
    if (v === null || v === undefined) return "—";
    if (v >= 3600) return (v / 3600).toFixed(1) + " h";
    if (v >= 60) return (v / 60).toFixed(1) + " min";
    return v.toFixed(v < 10 ? 2 : 0) + " s";
  }

  function sum(obj) {
    return Object.keys(obj).reduce(function (n, k) {
      return n + obj[k];
    }, 0);
  }

  /* A trend: the change from the previous window; `lowerIsBetter` colours it. */
  function trend(card, now, before, lowerIsBetter, fmt) {
    var p = card.querySelector(".trend");
    p.className = "trend";
    if (now === null || now === undefined || before === null || before === undefined) {
      p.textContent = before === null || before === undefined ? "no earlier value to compare" : "was " + fmt(before);
      p.classList.add("trend-same");
      return;
    }
    var delta = now - before;
    if (Math.abs(delta) < 1e-9) {
      p.textContent = "= same as the window before";
      p.classList.add("trend-same");
      return;
    }
    var better = lowerIsBetter ? delta < 0 : delta > 0;
    p.textContent = (delta > 0 ? "▲ " : "▼ ") + "from " + fmt(before);
    p.classList.add(better ? "trend-better" : "trend-worse");
  }

  function setValue(id, text, alarm) {
    var card = el(id);
    card.querySelector(".value").textContent = text;
    card.classList.toggle("alarm", Boolean(alarm));
    return card;
  }

  function listUrl(root, params) {
    var query = Object.keys(params)
      .filter(function (k) {
        return params[k];
      })
      .map(function (k) {
        return encodeURIComponent(k) + "=" + encodeURIComponent(params[k]);
      })
      .join("&");
    return root.dataset.list + (query ? "?" + query : "");
  }

  function renderMeasures(root, now, before) {
    var card = setValue("m-recovery", fmtRate(now.recovery_success_rate));
    trend(card, now.recovery_success_rate, before.recovery_success_rate, false, fmtRate);
    card = setValue("m-duplicates", fmtRate(now.duplicate_effect_rate));
    trend(card, now.duplicate_effect_rate, before.duplicate_effect_rate, true, fmtRate);
    card = setValue("m-resume", fmtMs(now.resume_latency_ms.p50) + " / " + fmtMs(now.resume_latency_ms.p95));
    trend(card, now.resume_latency_ms.p95, before.resume_latency_ms.p95, true, fmtMs);
    var stuck = sum(now.stuck);
    card = setValue("m-stuck", String(stuck), stuck > 0);
    card.querySelector(".trend").textContent = "";
    var integrity = now.approval_integrity;
    card = setValue("m-integrity", integrity.matched + " / " + integrity.refused);
    trend(card, integrity.refused, before.approval_integrity.refused, true, function (v) {
      return v + " refused";
    });
    card = setValue("m-cancellation", String(now.cancellation_violations), now.cancellation_violations > 0);
    trend(card, now.cancellation_violations, before.cancellation_violations, true, String);
    var approval = now.approval_latency_seconds;
    card = setValue("m-approval", fmtSeconds(approval.p50) + " / " + fmtSeconds(approval.p95));
    trend(card, approval.p95, before.approval_latency_seconds.p95, true, fmtSeconds);

    var rows = document.querySelectorAll("#time-in-state tbody tr");
    Array.prototype.forEach.call(rows, function (row) {
      var stay = now.time_in_state_seconds[row.dataset.status] || {};
      row.querySelector(".p50").textContent = fmtSeconds(stay.p50);
      row.querySelector(".p95").textContent = fmtSeconds(stay.p95);
    });

    var links = el("stuck-links");
    var reasons = Object.keys(now.stuck).filter(function (r) {
      return now.stuck[r] > 0;
    });
    links.textContent = "Stuck now: ";
    if (!reasons.length) {
      var none = document.createElement("span");
      none.className = "muted";
      none.textContent = "none";
      links.appendChild(none);
    }
    reasons.forEach(function (reason) {
      var a = document.createElement("a");
      a.href = listUrl(root, { reason: reason, workflow: root.dataset.workflow });
      a.textContent = reason.replace(/_/g, " ") + " (" + now.stuck[reason] + ")";
      a.dataset.reason = reason;
      links.appendChild(a);
    });
  }

  /* One chart: `series` is [[label, values, color, dashed]]; drawn again in place. */
  function draw(id, buckets, series, opts) {
    var figure = el(id);
    var plot = figure.querySelector(".plot");
    var data = [buckets].concat(
      series.map(function (s) {
        return s[1];
      })
    );
    var key = series
      .map(function (s) {
        return s[0];
      })
      .join("|");
    var chart = charts[id];
    if (chart && chart.key === key && chart.plot.data[0].length === buckets.length) {
      chart.plot.setData(data);
      return;
    }
    if (chart) chart.plot.destroy();
    var bars = opts && opts.bars && window.uPlot.paths && window.uPlot.paths.bars;
    var config = {
      width: Math.max(320, plot.clientWidth || 460),
      height: 220,
      scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, Math.max(1, max || 0) * 1.1]; } } },
      axes: [{}, { label: opts && opts.unit, size: 56 }],
      // A p95 line is dashed, and so is its marker: each p50 / p95 pair is told apart in the legend.
      legend: {
        live: false,
        markers: {
          dash: function (u, i) {
            return u.series[i].dash ? "dashed" : "solid";
          },
        },
      },
      series: [{}].concat(
        series.map(function (s) {
          return {
            label: s[0],
            stroke: s[2],
            width: 2,
            dash: s[3] ? [6, 4] : undefined,
            fill: bars ? s[2] + "55" : undefined,
            paths: bars ? window.uPlot.paths.bars({ size: [0.8, 40] }) : undefined,
            spanGaps: true,
            points: { show: !bars, size: 5 },
          };
        })
      ),
    };
    charts[id] = { key: key, plot: new window.uPlot(config, data, plot) };
    figure.dataset.drawn = "true";
  }

  function quantileSeries(label, q, color) {
    return [
      [label + "p50 (median, solid)", q.p50, color, false],
      [label + "p95 (dashed)", q.p95, color, true],
    ];
  }

  function hasData(values) {
    return values.some(function (v) {
      return v !== null && v !== 0;
    });
  }

  function renderCharts(history) {
    var b = history.buckets;
    var flow = history.executions;
    draw(
      "chart-executions",
      b,
      ["started", "completed", "failed", "cancelled"].map(function (name) {
        return [name, flow[name], STATUS_COLORS[name], false];
      }),
      { unit: "executions" }
    );

    var stuck = Object.keys(history.stuck_flagged).map(function (reason, i) {
      return [reason.replace(/_/g, " "), history.stuck_flagged[reason], COLORS[i % COLORS.length], false];
    });
    if (!stuck.length) stuck = [["none stopped", b.map(function () { return 0; }), COLORS[7], false]];
    draw("chart-stuck", b, stuck, { unit: "executions", bars: true });

    var stays = [];
    Object.keys(history.time_in_state_seconds).forEach(function (status, i) {
      var q = history.time_in_state_seconds[status];
      if (hasData(q.p50) || hasData(q.p95)) {
        stays = stays.concat(quantileSeries(status.replace(/_/g, " ") + " ", q, COLORS[i % COLORS.length]));
      }
    });
    if (!stays.length) stays = [["no stay ended", b.map(function () { return null; }), COLORS[7], false]];
    draw("chart-time-in-state", b, stays, { unit: "seconds" });

    draw("chart-resume", b, quantileSeries("", history.resume_latency_ms, COLORS[0]), { unit: "ms" });
    draw("chart-approval", b, quantileSeries("", history.approval_latency_seconds, COLORS[3]), { unit: "seconds" });
  }

  function query(root) {
    var params = "?window=" + encodeURIComponent(root.dataset.window);
    if (root.dataset.workflow) params += "&workflow=" + encodeURIComponent(root.dataset.workflow);
    return params;
  }

  // A read that hangs is given up after this long, so the page says it is stale.
  var READ_TIMEOUT_MS = 20000;
  var lastRead = null;

  function getJson(url) {
    var options = { credentials: "same-origin", headers: { Accept: "application/json" } };
    if (window.AbortSignal && AbortSignal.timeout) options.signal = AbortSignal.timeout(READ_TIMEOUT_MS);
    return fetch(url, options).then(function (r) {
      if (!r.ok) throw new Error(url + ": " + r.status);
      return r.json();
    });
  }

  function refresh(root) {
    var q = query(root);
    return Promise.all([getJson(root.dataset.api + q), getJson(root.dataset.history + q)])
      .then(function (answers) {
        renderMeasures(root, answers[0], answers[1].previous);
        renderCharts(answers[1]);
        el("metrics-error").hidden = true;
        lastRead = new Date().toISOString().slice(11, 19) + " UTC";
        el("metrics-updated").textContent = "Updated " + lastRead + ".";
        root.dataset.loaded = String(Number(root.dataset.loaded || 0) + 1);
      })
      .catch(function () {
        var error = el("metrics-error");
        error.textContent =
          "The measures could not be read" + (lastRead ? " (these are from " + lastRead + ")" : "") + "; retrying.";
        error.hidden = false;
      });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var root = el("metrics");
    if (!root || !window.uPlot) return;
    refresh(root);
    window.setInterval(function () {
      refresh(root);
    }, Number(root.dataset.pollMs) || 15000);
  });
})();
