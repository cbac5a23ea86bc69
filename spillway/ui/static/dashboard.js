// spillway's dashboard: one panel per node, fed by server-sent events from /api/events.
// Every figure shown keeps its raw value in data-value (null when unknown), and each node's
// panel carries data-t (the feed time of the snapshot shown) and data-phase, so tests and
// scripts can read exactly what a person sees. Charts are drawn with uPlot, bundled at set-up.
"use strict";

(() => {
  const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2",
    "#ca8a04", "#db2777", "#4b5563", "#65a30d"];
  const CHART_HEIGHT = 220;
  const REDRAW_MS = 1000;
  const nodes = new Map();

  const fmt = (x, digits) => (x === null || x === undefined || Number.isNaN(x))
    ? "-"
    : x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
  const pct = (x, digits) => (x === null || x === undefined) ? "-" : fmt(100 * x, digits);

  function setField(el, value, text) {
    el.dataset.value = value === null || value === undefined ? "null" : String(value);
    el.textContent = text;
  }

  function emptySeries() {
    return { t: [], capacity: [], measured: [], processed: [], jain: [], sic: [],
      classLatency: [], classKept: [], classHeadroom: [] };
  }

  function view(name) {
    let v = nodes.get(name);
    if (v) return v;
    const root = document.getElementById("node-template").content.firstElementChild.cloneNode(true);
    root.id = `node-${name}`;
    root.dataset.node = name;
    root.querySelector(".node-name").textContent = name;
    document.getElementById("nodes").appendChild(root);
    v = { root, rows: new Map(), classRows: new Map(), series: emptySeries(), charts: {}, groups: "",
      drawn: 0, queries: [], classes: [] };
    nodes.set(name, v);
    return v;
  }

  function addPoints(v, p) {
    if (!p.since) v.series = emptySeries();
    const s = v.series;
    for (const pt of p.points) {
      s.t.push(pt.t);
      s.capacity.push(pt.capacity_tuples_per_s);
      s.measured.push(pt.capacity_measured_tuples_per_s);
      s.processed.push(pt.processed_tuples_per_s);
      s.jain.push(pt.jain);
      pt.sic.forEach((x, i) => { (s.sic[i] = s.sic[i] || []).push(x); });
      // per class, padded so that every class series is as long as s.t
      const n = s.t.length - 1;
      const push = (arr, values) => (values || []).forEach((x, i) => {
        arr[i] = arr[i] || new Array(n).fill(null);
        arr[i].push(x);
      });
      push(s.classLatency, pt.class_latency_p95_s);
      push(s.classKept, pt.class_kept);
      push(s.classHeadroom, pt.class_headroom);
      for (const arr of [s.classLatency, s.classKept, s.classHeadroom]) {
        for (const a of arr) if (a && a.length < s.t.length) a.push(null);
      }
    }
  }

  function header(v, p) {
    const badge = v.root.querySelector(".phase");
    badge.textContent = p.phase;
    badge.dataset.phase = p.phase;
    v.root.querySelector(".policy").textContent = p.policy ? `policy ${p.policy}` : "";
    const elapsed = v.root.querySelector(".elapsed");
    const t = p.t === null ? null : p.t;
    elapsed.textContent = t === null ? "" : `t ${fmt(t, 0)} s` + (p.duration_s ? ` of ${fmt(p.duration_s, 0)} s` : "");
    const bar = v.root.querySelector(".run-progress");
    bar.value = p.duration_s && t !== null ? Math.min(t / p.duration_s, 1) : 0;
  }

  function calibration(v, p) {
    const box = v.root.querySelector(".calibration");
    const c = p.calibration;
    const show = p.phase === "starting" || p.phase === "calibrating";
    box.hidden = !show;
    if (!show) return;
    const summary = box.querySelector(".cal-summary");
    if (!c) {
      summary.textContent = "Starting Spark and the node's streaming query…";
      return;
    }
    summary.dataset.round = String(c.round);
    summary.textContent = `Round ${c.round} (of at most ${c.max_rounds}), ${fmt(c.elapsed_s, 0)} s`
      + ` elapsed: ${fmt(c.arrival_rate, 0)} t/s arriving, ${c.batches} batches measured, largest`
      + ` ${fmt(c.largest_batch, 0)} rows, best ${fmt(c.best_tuples_per_s, 0)} t/s of batch time.`
      + (c.capacity_tuples_per_s === null ? "" : ` Capacity so far: ${fmt(c.capacity_tuples_per_s, 0)} t/s.`);
    box.querySelector(".cal-progress").value = c.min_s ? Math.min(c.elapsed_s / c.min_s, 1) : 0;
    const body = box.querySelector("tbody");
    body.replaceChildren(...c.rounds.map(([rate, cap], i) => {
      const tr = document.createElement("tr");
      for (const text of [String(i + 1), fmt(rate, 0), fmt(cap, 0)]) {
        const td = document.createElement("td");
        td.textContent = text;
        tr.appendChild(td);
      }
      return tr;
    }));
  }

  function figures(v, p) {
    const f = (name) => v.root.querySelector(`.figures [data-field="${name}"]`);
    setField(f("capacity_tuples_per_s"), p.capacity_tuples_per_s, `${fmt(p.capacity_tuples_per_s, 0)} t/s`);
    setField(f("capacity_measured_tuples_per_s"), p.capacity_measured_tuples_per_s,
      `${fmt(p.capacity_measured_tuples_per_s, 0)} t/s`);
    setField(f("processed_tuples_per_s"), p.processed_tuples_per_s, `${fmt(p.processed_tuples_per_s, 0)} t/s`);
    setField(f("utilisation"), p.utilisation, `${pct(p.utilisation, 0)} %`);
    setField(f("jain"), p.jain, fmt(p.jain, 3));
    setField(f("shed"), p.tuples_shed, `${fmt(p.tuples_shed, 0)} / ${fmt(p.tuples_arrived, 0)}`);
  }

  const COLUMNS = ["name", "kind", "arrival_rate", "kept_fraction", "sic", "latency_p95_s",
    "latency_target_s", "status", "error"];

  function row(v, q) {
    let tr = v.rows.get(q.name);
    if (tr) return tr;
    tr = document.createElement("tr");
    tr.dataset.query = q.name;
    for (const c of COLUMNS) {
      const td = document.createElement("td");
      td.dataset.field = c;
      tr.appendChild(td);
    }
    v.root.querySelector(".queries tbody").appendChild(tr);
    v.rows.set(q.name, tr);
    return tr;
  }

  function queries(v, p) {
    v.queries = p.queries.map((q) => q.name);
    for (const q of p.queries) {
      const tr = row(v, q);
      const cell = (name) => tr.querySelector(`[data-field="${name}"]`);
      setField(cell("name"), q.name, q.name);
      setField(cell("kind"), q.kind, q.kind || "-");
      setField(cell("arrival_rate"), q.arrival_rate, fmt(q.arrival_rate, 0));
      setField(cell("kept_fraction"), q.kept_fraction, pct(q.kept_fraction, 1));
      setField(cell("sic"), q.sic, fmt(q.sic, 3));
      setField(cell("latency_p95_s"), q.latency_p95_s, fmt(q.latency_p95_s, 2));
      setField(cell("latency_target_s"), q.latency_target_s, fmt(q.latency_target_s, 2));
      let status = "-";
      if (q.ended) status = "feed ended";
      else if (q.on_target === true) status = "on target";
      else if (q.on_target === false) status = q.latency_p95_s === null ? "no result yet" : "MISS";
      const st = cell("status");
      setField(st, status, status);
      st.dataset.ok = String(q.on_target === true || q.ended === true);
      setField(cell("error"), q.error, q.error === null ? "n/a" : fmt(q.error, 3));
    }
  }

  const CLASS_COLUMNS = ["class", "weight", "queries", "kept_fraction", "loss", "latency_p95_s",
    "latency_target_s", "class_status", "headroom", "share"];

  function classes(v, p) {
    const cs = p.classes || [];
    v.classes = cs;
    const box = v.root.querySelector(".classes");
    box.hidden = cs.length === 0;
    for (const fig of v.root.querySelectorAll(".class-chart")) fig.hidden = cs.length === 0;
    const body = box.querySelector("tbody");
    for (const c of cs) {
      let tr = v.classRows.get(c.class);
      if (!tr) {
        tr = document.createElement("tr");
        tr.dataset.class = String(c.class);
        for (const name of CLASS_COLUMNS) {
          const td = document.createElement("td");
          td.dataset.field = name;
          tr.appendChild(td);
        }
        body.appendChild(tr);
        v.classRows.set(c.class, tr);
      }
      const cell = (name) => tr.querySelector(`[data-field="${name}"]`);
      setField(cell("class"), c.class, String(c.class));
      setField(cell("weight"), c.weight, String(c.weight));
      setField(cell("queries"), c.queries.join(","), c.queries.join(", "));
      setField(cell("kept_fraction"), c.kept_fraction, pct(c.kept_fraction, 1));
      setField(cell("loss"), c.loss, pct(c.loss, 1));
      setField(cell("latency_p95_s"), c.latency_p95_s, fmt(c.latency_p95_s, 2));
      setField(cell("latency_target_s"), c.latency_target_s, fmt(c.latency_target_s, 2));
      const status = c.on_target ? "on target" : (c.latency_p95_s === null ? "no result yet" : "MISS");
      const st = cell("class_status");
      setField(st, status, status);
      st.dataset.ok = String(c.on_target === true);
      setField(cell("headroom"), c.headroom, fmt(c.headroom, 3));
      setField(cell("share"), c.share, pct(c.share, 1));
    }
  }

  function chart(v, key, series, data, scale) {
    const holder = v.root.querySelector(`.chart-${key}`);
    const width = Math.max(holder.clientWidth, 300);
    const signature = JSON.stringify(series.map((s) => s.label));
    let c = v.charts[key];
    if (c && c.signature !== signature) {
      c.plot.destroy();
      c = null;
    }
    if (!c) {
      const opts = {
        width, height: CHART_HEIGHT,
        scales: { x: { time: false }, y: scale || {} },
        axes: [{ label: "feed time (s)" }, { size: 72 }],  // room for "1,000,000"
        series: [{ label: "t" }, ...series],
        legend: { live: false },
      };
      c = { plot: new uPlot(opts, data, holder), signature };
      v.charts[key] = c;
    } else {
      c.plot.setData(data);
      if (Math.abs(c.plot.width - width) > 4) c.plot.setSize({ width, height: CHART_HEIGHT });
    }
  }

  function sameSeries(names, series) {
    // names whose series are identical share one line, labelled with every name
    const groups = new Map();
    names.forEach((name, i) => {
      const key = JSON.stringify(series[i] || []);
      if (!groups.has(key)) groups.set(key, { names: [], index: i });
      groups.get(key).names.push(name);
    });
    return [...groups.values()];
  }

  const groupLabel = (g) => g.names.length > 1 ? `${g.names[0]} (+${g.names.length - 1} identical)` : g.names[0];

  function charts(v) {
    if (typeof uPlot === "undefined" || v.series.t.length === 0) return;
    const now = Date.now();
    if (now - v.drawn < REDRAW_MS) return;
    v.drawn = now;
    const s = v.series;
    const groups = sameSeries(v.queries, s.sic);
    chart(v, "sic",
      groups.map((g, k) => ({ label: groupLabel(g), stroke: PALETTE[k % PALETTE.length], width: 1.5 })),
      [s.t, ...groups.map((g) => s.sic[g.index] || [])],
      { range: [0, 1.05] });
    chart(v, "capacity", [
      { label: "estimate", stroke: PALETTE[0], width: 1.5 },
      { label: "measured", stroke: PALETTE[2], width: 1.5 },
      { label: "processed", stroke: PALETTE[1], width: 1.5, dash: [4, 3] },
    ], [s.t, s.capacity, s.measured, s.processed]);
    chart(v, "jain", [{ label: "Jain", stroke: PALETTE[3], width: 1.5 }], [s.t, s.jain],
      { range: [0, 1.05] });
    if (v.classes.length === 0) return;
    const label = (c) => `class ${c.class}`;
    const line = (c, k) => ({ label: label(c), stroke: PALETTE[k % PALETTE.length], width: 1.5 });
    // classes that share micro-batches have one latency series: drawn once
    const lat = sameSeries(v.classes.map(label), s.classLatency);
    chart(v, "class-latency", [
      ...lat.map((g, k) => ({ label: groupLabel(g), stroke: PALETTE[k % PALETTE.length], width: 1.5 })),
      ...v.classes.map((c, k) => ({ label: `D ${c.class}`, stroke: PALETTE[(k + lat.length) % PALETTE.length], width: 1, dash: [4, 3] })),
    ], [s.t, ...lat.map((g) => s.classLatency[g.index] || []),
      ...v.classes.map((c) => s.t.map(() => c.latency_target_s))]);
    chart(v, "class-kept", v.classes.map(line), [s.t, ...v.classes.map((c, k) => s.classKept[k] || [])],
      { range: [0, 1.05] });
    chart(v, "class-headroom", v.classes.map(line),
      [s.t, ...v.classes.map((c, k) => s.classHeadroom[k] || [])]);
  }

  function footer(v, p) {
    v.root.querySelector(".lines").textContent = p.lines.join("\n");
    const rep = v.root.querySelector(".report");
    rep.hidden = !(p.report || p.error);
    rep.textContent = p.error ? `The run failed: ${p.error}` : (p.report ? `Run finished; report: ${p.report}` : "");
  }

  function render(p) {
    const v = view(p.name);
    addPoints(v, p);
    header(v, p);
    calibration(v, p);
    figures(v, p);
    queries(v, p);
    classes(v, p);
    charts(v);
    footer(v, p);
    v.root.dataset.phase = p.phase;
    v.root.dataset.t = p.t === null ? "null" : String(p.t);
    v.root.dataset.version = String(p.version);
  }

  function connect() {
    const badge = document.getElementById("connection");
    const es = new EventSource("api/events");
    es.addEventListener("open", () => { badge.textContent = "live"; badge.dataset.state = "live"; });
    es.addEventListener("state", (ev) => {
      for (const p of JSON.parse(ev.data).nodes) render(p);
    });
    es.addEventListener("error", () => {
      badge.textContent = "disconnected (retrying)";
      badge.dataset.state = "disconnected";
    });
  }

  window.addEventListener("resize", () => { for (const v of nodes.values()) { v.drawn = 0; charts(v); } });
  connect();
})();
