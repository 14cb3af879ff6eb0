// ThreadX report: draws each chart from its JSON spec (crates/report/src/charts.rs) with
// uPlot, keeps the charts of one `sync` key on one cursor and zoom, and sorts a table by
// the column whose header is clicked. It requests nothing: everything is in the page.
(function () {
  "use strict";
  var fmt = {
    pct: function (v) { return v == null ? "-" : (v * 100).toFixed(2) + " %"; },
    num: function (v) {
      if (v == null) return "-";
      var a = Math.abs(v);
      return a >= 1000 ? v.toFixed(0) : a >= 1 ? v.toFixed(3) : a === 0 ? "0" : v.toPrecision(3);
    },
    count: function (v) { return v == null ? "-" : String(Math.round(v)); }
  };
  var synced = {};
  var plots = [];

  function time(v) {
    return v == null ? "-" : new Date(v * 1000).toISOString().replace("T", " ").slice(0, 16) + " UTC";
  }

  // Bars stand on their x values: half a step of room at each end keeps the first and the
  // last bar whole (uPlot's own range ends at their centres).
  function barRange(xs) {
    var half = xs.length > 1 ? (xs[xs.length - 1] - xs[0]) / (xs.length - 1) / 2 : 0.5;
    return function () { return [xs[0] - half, xs[xs.length - 1] + half]; };
  }

  function draw(spec, box) {
    var bars = spec.kind === "bars";
    var xValue = spec.x.time ? function (u, v) { return time(v); } : function (u, v) { return fmt[spec.x.unit](v); };
    var yValue = function (u, v) { return fmt[spec.y.unit](v); };
    var series = [{ label: spec.x.label, value: xValue }];
    spec.series.forEach(function (s) {
      // A marker series (a trade's entries, its exits) is dots at its values, no line.
      if (s.marker) {
        series.push({
          label: s.label,
          stroke: s.color,
          width: 1,
          paths: function () { return null; },
          points: { show: true, size: 8, width: 1, stroke: s.color, fill: s.color },
          value: yValue
        });
        return;
      }
      series.push({
        label: s.label,
        stroke: s.color,
        width: bars ? 0 : 1.5,
        // A band of a stacked area is filled to zero, over the bands drawn before it.
        fill: bars || s.fill ? s.color : undefined,
        paths: bars ? uPlot.paths.bars({ size: [0.92, 100] }) : spec.step ? uPlot.paths.stepped({ align: 1 }) : undefined,
        points: { show: false },
        value: yValue
      });
    });
    // Tick labels carry the decimals their spacing needs, no more, so they never run
    // into each other.
    var axisTicks = function (unit) {
      return function (u, values, axis, space, step) {
        var scale = unit === "pct" ? 100 : 1;
        var digits = unit === "count" ? 0 : Math.max(0, Math.min(8, -Math.floor(Math.log10(step * scale) + 1e-9)));
        return values.map(function (v) {
          return v == null ? "" : (v * scale).toFixed(digits) + (unit === "pct" ? " %" : "");
        });
      };
    };
    // A count's ticks fall on whole numbers: uPlot's own steps put two ticks on one window.
    var countSteps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 1e7, 1e8];
    var withSteps = function (options, axis) {
      if (axis.unit === "count" && !axis.time) options.incrs = countSteps;
      return options;
    };
    var opts = {
      title: spec.title,
      width: Math.max(320, box.clientWidth || 960),
      height: spec.height,
      scales: { x: bars ? { time: false, range: barRange(spec.data[0]) } : { time: !!spec.x.time } },
      axes: [
        withSteps({ label: spec.x.label, values: spec.x.time ? undefined : axisTicks(spec.x.unit), space: 70 }, spec.x),
        withSteps({ label: spec.y.label, values: axisTicks(spec.y.unit), size: 72, space: 40 }, spec.y)
      ],
      series: series,
      cursor: { drag: { x: true, y: false } },
      hooks: {}
    };
    if (spec.sync) {
      opts.cursor.sync = { key: spec.sync };
      opts.hooks.setScale = [function (u, key) {
        if (key !== "x" || u.syncing) return;
        (synced[spec.sync] || []).forEach(function (other) {
          if (other === u) return;
          other.syncing = true;
          other.setScale("x", { min: u.scales.x.min, max: u.scales.x.max });
          other.syncing = false;
        });
      }];
    }
    // What the x axis shows, for the page checks.
    opts.hooks.ready = [function (u) {
      box.setAttribute("data-x-range", JSON.stringify([u.scales.x.min, u.scales.x.max]));
    }];
    var plot = new uPlot(opts, spec.data, box);
    plots.push([plot, box, spec.height]);
    if (spec.sync) (synced[spec.sync] = synced[spec.sync] || []).push(plot);
  }

  document.querySelectorAll("script[data-chart]").forEach(function (el) {
    draw(JSON.parse(el.textContent), document.getElementById(el.getAttribute("data-chart")));
  });

  // The charts follow the page's width when the window changes.
  var resizing = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      plots.forEach(function (p) { p[0].setSize({ width: Math.max(320, p[1].clientWidth), height: p[2] }); });
    }, 100);
  });

  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (head, i) {
      head.title = "Sort by " + head.textContent;
      head.addEventListener("click", function () {
        var dir = head.getAttribute("data-dir") === "asc" ? "desc" : "asc";
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("data-dir"); });
        head.setAttribute("data-dir", dir);
        var body = table.tBodies[0];
        var key = function (row) {
          var cell = row.cells[i];
          var v = cell.getAttribute("data-v");
          return v === null ? cell.textContent : parseFloat(v);
        };
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a), y = key(b);
          var order = typeof x === "number" && typeof y === "number" ? x - y
            : typeof x === "number" ? -1 : typeof y === "number" ? 1 : String(x).localeCompare(String(y));
          return dir === "asc" ? order : -order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
  document.body.setAttribute("data-rendered", "true");
})();
