// sim timeline: draws one run as lanes over virtual time on a canvas.
// Plain JavaScript, no dependency, no network. The data is the JSON in
// #run-data, written by `sim run --html` (src/timeline/mod.rs).
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("run-data").textContent);
  // Row fields (see `data` in mod.rs).
  const STEP = 0, TIME = 1, LANE = 2, ACTION = 3, OUTCOME = 4, TASK = 5, MESSAGE = 6,
    ENTRY = 7, ATTEMPT = 8, VERSION = 9, HASH = 10, FAULT = 11, STATE = 12;
  const rows = D.rows;
  const n = rows.length;
  const lanes = D.lanes;
  const laneIndex = {};
  lanes.forEach((name, i) => { laneIndex[name] = i; });
  const STORES = new Set(["database", "broker task-work", "broker task-events", "dead letters",
    "artifact store", "cache"]);
  const LANE_H = 24, AXIS_H = 30, PAD_R = 48, PAD_L = 12;

  // ---- what each step touched, and its hand-offs -------------------------
  const action = (r) => D.actions[r[ACTION]];
  const verb = (r) => { const a = action(r); return a.slice(a.indexOf(".") + 1); };
  const topicLane = (r) => laneIndex[(D.topics[r[MESSAGE]] === "task-events")
    ? "broker task-events" : "broker task-work"];
  const DB = laneIndex["database"], STORE = laneIndex["artifact store"],
    CACHE = laneIndex["cache"], DLQ = laneIndex["dead letters"];
  const TOUCHES = {
    "api.create": [DB], "api.cancel": [DB], "api.read-db": [DB], "api.insert-record": [DB],
    "api.create-task": [DB], "api.read-quota": [DB], "api.publish": ["topic"],
    "api.read-cache": [CACHE], "api.fill-cache": [CACHE],
    "publisher.claim": [DB], "publisher.mark": [DB], "publisher.publish": ["topic"],
    "worker.register": [DB], "worker.start": [DB], "worker.plan": [DB],
    "worker.record-unknown": [DB], "worker.verify": [DB], "worker.recheck": [DB],
    "worker.reload": [DB], "worker.complete": [DB], "worker.quarantine": [DB, DLQ],
    "worker.fail-poison": [DB], "worker.fail": [DB], "worker.fence-claim": [DB],
    "worker.fence-check": [DB], "worker.resolve": [DB], "worker.expire": [DB],
    "worker.compensate": [STORE, DB], "worker.put": [STORE], "worker.read-back": [STORE],
    "worker.check-hidden": [STORE], "worker.fence-read": [STORE], "worker.fence-hide": [STORE],
    "worker.ack": ["topic"], "worker.nack": ["topic"], "worker.dead-letter": [DLQ],
    "projector.invalidate": [CACHE], "projector.refetch": [DB], "projector.rebuild": [DB],
    "projector.ack": ["topic"],
    "reconciler.scan": [DB], "reconciler.expire": [DB], "reconciler.review": [DB],
    "reconciler.fence-claim": [DB], "reconciler.fence-check": [DB], "reconciler.resolve": [DB],
    "reconciler.fence-read": [STORE], "reconciler.fence-hide": [STORE],
    "reconciler.redrive": [DB, "topic"],
    "operator.bump-handler-version": [DB], "operator.replay-dead-letter": [DLQ, DB],
    "operator.append-event": [DB],
  };
  const touches = new Array(n);
  for (let i = 0; i < n; i++) {
    const r = rows[i];
    const t = (TOUCHES[action(r)] || []).map((x) => (x === "topic" ? topicLane(r) : x));
    touches[i] = t.filter((x) => x !== undefined && x !== r[LANE]);
  }
  const byStep = new Map();
  rows.forEach((r, i) => byStep.set(r[STEP], i));
  // Hand-offs as [from row, to row or null, to lane, kind].
  const arrows = [];
  for (const [from, to] of D.sends) {
    if (byStep.has(from) && byStep.has(to)) arrows.push([byStep.get(from), byStep.get(to), null, "send"]);
  }
  for (const [step, client] of D.answers) {
    if (!byStep.has(step)) continue;
    const i = byStep.get(step);
    arrows.push([i, null, laneIndex["client-" + (client + 1)], rows[i][OUTCOME] >= 0 &&
      D.outcomes[rows[i][OUTCOME]] === "lost" ? "lost" : "answer"]);
  }
  {
    // A delivery goes to the first later step of a consumer with its entry
    // (or, for the projector's apply, its task and hash).
    const byEntry = new Map(), byHash = new Map();
    const brokerLanes = new Set([laneIndex["broker task-work"], laneIndex["broker task-events"], DLQ]);
    for (let i = 0; i < n; i++) {
      const r = rows[i];
      if (brokerLanes.has(r[LANE])) continue;
      if (r[ENTRY]) { if (!byEntry.has(r[ENTRY])) byEntry.set(r[ENTRY], []); byEntry.get(r[ENTRY]).push(i); }
      if (r[HASH] && r[TASK]) {
        const k = r[TASK] + ":" + r[HASH];
        if (!byHash.has(k)) byHash.set(k, []);
        byHash.get(k).push(i);
      }
    }
    const firstAfter = (list, i) => { if (!list) return -1; for (const j of list) if (j > i) return j; return -1; };
    for (let i = 0; i < n; i++) {
      const r = rows[i];
      if (action(r) === "broker.deliver" || action(r) === "operator.deliver-event") {
        let j = firstAfter(byEntry.get(r[ENTRY]), i);
        const h = firstAfter(byHash.get(r[TASK] + ":" + r[HASH]), i);
        if (h >= 0 && rows[h][LANE] === laneIndex["projector"] && (j < 0 || h < j)) j = h;
        if (j >= 0) arrows.push([i, j, null, "deliver"]);
      }
    }
  }
  const arrowsFrom = new Map(), arrowsTo = new Map();
  arrows.forEach((a, k) => {
    if (!arrowsFrom.has(a[0])) arrowsFrom.set(a[0], []);
    arrowsFrom.get(a[0]).push(k);
    if (a[1] !== null) { if (!arrowsTo.has(a[1])) arrowsTo.set(a[1], []); arrowsTo.get(a[1]).push(k); }
  });

  // ---- crashes, restarts ------------------------------------------------
  const downs = []; // [lane, from row, to row or n]
  {
    const open = new Map();
    for (let i = 0; i < n; i++) {
      const v = verb(rows[i]);
      if (v === "crash") open.set(rows[i][LANE], i);
      if (v === "restart" && open.has(rows[i][LANE])) {
        downs.push([rows[i][LANE], open.get(rows[i][LANE]), i]);
        open.delete(rows[i][LANE]);
      }
    }
    for (const [lane, i] of open) downs.push([lane, i, null]);
  }

  // ---- matching ids: filter, search, violation slice ---------------------
  function matcher(text) {
    const q = text.trim().toLowerCase();
    if (!q) return null;
    let m;
    if ((m = /^task-(\d+)$/.exec(q))) { const t = +m[1]; return (r) => r[TASK] === t; }
    if ((m = /^(?:outbox|message)-(\d+)$/.exec(q))) { const t = +m[1]; return (r) => r[MESSAGE] === t; }
    if ((m = /^entry-(\d+)$/.exec(q))) { const t = +m[1]; return (r) => r[ENTRY] === t; }
    if ((m = /^task-(\d+):[a-z]+:attempt-(\d+)$/.exec(q))) {
      const t = +m[1], a = +m[2];
      return (r) => r[TASK] === t && (r[ATTEMPT] === a || r[ATTEMPT] === 0);
    }
    if (q in laneIndex) { const l = laneIndex[q]; return (r) => r[LANE] === l; }
    const tasks = new Set();
    for (const [id, t] of Object.entries(D.tasks)) {
      const key = t.key.toLowerCase();
      if (key === q || key.endsWith(":" + q) || t.tokens.some((k) => k.toLowerCase() === q)) tasks.add(+id);
    }
    if (tasks.size) return (r) => tasks.has(r[TASK]);
    if (/^[0-9a-f]{4,16}$/.test(q)) return (r) => r[HASH].startsWith(q);
    return () => false;
  }
  let filterFn = null, filtered = null, filteredCount = n;
  const slice = new Uint8Array(n);
  let sliceCount = 0;
  const violationRow = D.violation && byStep.has(D.violation.step) ? byStep.get(D.violation.step) : -1;
  if (D.violation) {
    const fns = D.violation.entities.map(matcher).filter(Boolean);
    for (let i = 0; i < n; i++) if (fns.some((f) => f(rows[i]))) { slice[i] = 1; sliceCount++; }
    if (violationRow >= 0 && !slice[violationRow]) { slice[violationRow] = 1; sliceCount++; }
  }

  // ---- view --------------------------------------------------------------
  const canvas = document.getElementById("canvas");
  const ctx = canvas.getContext("2d");
  const labels = document.getElementById("labels");
  const chart = document.getElementById("chart");
  let axis = "time";
  const xval = (i) => (axis === "time" ? rows[i][TIME] : i);
  let width = 0, height = 0;
  let x0 = 0, scale = 1; // value at the left edge; pixels per unit
  let selected = -1;
  let showSlice = true;
  let lastDrawn = 0;
  const laneY = (l) => AXIS_H + l * LANE_H + LANE_H / 2;

  function extent() {
    if (!n) return [0, 1];
    return [xval(0), Math.max(xval(n - 1), xval(0) + 1)];
  }
  function fit() {
    const [a, b] = extent();
    const span = b - a;
    scale = (width - PAD_L - PAD_R) / span;
    x0 = a - PAD_L / scale;
  }
  const px = (v) => (v - x0) * scale;
  // On the time axis, steps of one lane in the same millisecond stand side
  // by side, SPREAD pixels apart, so each can be seen and clicked.
  const SPREAD = 7;
  const sub = new Uint16Array(n);
  let subMax = 0;
  for (let i = 1; i < n; i++) {
    for (let j = i - 1; j >= 0 && rows[j][TIME] === rows[i][TIME]; j--) {
      if (rows[j][LANE] === rows[i][LANE]) { sub[i] = sub[j] + 1; subMax = Math.max(subMax, sub[i]); break; }
    }
  }
  const X = (i) => px(xval(i)) + (axis === "time" ? sub[i] * SPREAD : 0);
  // First row whose x value is >= v (rows are in step order, and both time
  // and step order only grow).
  function lowerBound(v) {
    let lo = 0, hi = n;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (xval(mid) < v) lo = mid + 1; else hi = mid; }
    return lo;
  }

  function layout() {
    const h = AXIS_H + lanes.length * LANE_H + 18;
    const w = Math.max(200, chart.clientWidth - labels.offsetWidth);
    const ratio = window.devicePixelRatio || 1;
    canvas.style.height = h + "px";
    canvas.style.width = w + "px";
    canvas.width = Math.round(w * ratio);
    canvas.height = Math.round(h * ratio);
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    labels.style.height = h + "px";
    const keep = width ? [x0 + (width / 2) / scale, scale] : null;
    width = w; height = h;
    if (keep) x0 = keep[0] - (width / 2) / scale;
  }

  function actorColour(lane) {
    const name = lanes[lane];
    if (name.startsWith("client")) return "#2b6cb0";
    if (name.startsWith("api")) return "#2f855a";
    if (name.startsWith("publisher")) return "#805ad5";
    if (name.startsWith("broker") || name === "dead letters") return "#b7791f";
    if (name.startsWith("worker")) return "#0f766e";
    if (name === "projector") return "#c05621";
    if (name === "reconciler") return "#4a5568";
    if (name === "operator") return "#97266d";
    return "#4a5568";
  }

  function niceStep(span, target) {
    const raw = span / target;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (raw <= m * p) return m * p;
    return 10 * p;
  }

  function draw() {
    ctx.clearRect(0, 0, width, height);
    // Lanes.
    for (let l = 0; l < lanes.length; l++) {
      ctx.fillStyle = STORES.has(lanes[l]) ? "#f1eefa" : (l % 2 ? "#f7f8fa" : "#ffffff");
      ctx.fillRect(0, AXIS_H + l * LANE_H, width, LANE_H);
    }
    // Axis.
    const v0 = x0, v1 = x0 + width / scale;
    const tick = Math.max(1, niceStep(v1 - v0, Math.max(2, width / 110)));
    ctx.fillStyle = "#48525e"; ctx.strokeStyle = "#e2e6eb"; ctx.lineWidth = 1;
    ctx.font = "11px system-ui, sans-serif"; ctx.textBaseline = "middle"; ctx.textAlign = "center";
    for (let v = Math.ceil(v0 / tick) * tick; v <= v1; v += tick) {
      const x = Math.round(px(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, AXIS_H - 6); ctx.lineTo(x, height); ctx.stroke();
      if (axis === "time") ctx.fillText(v + " ms", x, AXIS_H / 2);
      else if (v >= 0 && v < n) ctx.fillText("step " + rows[v][STEP], x, AXIS_H / 2);
    }
    // Visible rows, with a margin for arrows that come from off screen.
    const a = Math.max(0, lowerBound(v0 - 40 / scale) - 1);
    const b = Math.min(n, lowerBound(v1 + 40 / scale) + 1);
    const count = b - a;
    // Crashed actors: their lane is shaded until the restart.
    ctx.fillStyle = "rgba(192,24,43,0.10)";
    for (const [lane, from, to] of downs) {
      const xa = X(from), xb = to === null ? width : X(to);
      if (xb < 0 || xa > width) continue;
      ctx.fillRect(xa, AXIS_H + lane * LANE_H + 2, Math.max(2, xb - xa), LANE_H - 4);
    }
    const dim = (i) => (filtered && !filtered[i]) || false;
    // Touches and hand-offs: only when few enough to read.
    const detailed = count <= 6000;
    if (detailed) {
      ctx.lineWidth = 1;
      for (let i = a; i < b; i++) {
        if (!touches[i].length || dim(i)) continue;
        const x = X(i), y = laneY(rows[i][LANE]);
        for (const l of touches[i]) {
          const y2 = laneY(l);
          ctx.strokeStyle = "rgba(91,74,139,0.35)";
          ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x, y2); ctx.stroke();
          ctx.fillStyle = "rgba(91,74,139,0.7)";
          ctx.fillRect(x - 2.5, y2 - 2.5, 5, 5);
        }
      }
      for (let k = 0; k < arrows.length; k++) {
        const [from, to, lane, kind] = arrows[k];
        const end = to === null ? from : to;
        if (Math.max(from, end) < a || Math.min(from, end) >= b) continue;
        if (dim(from) && (to === null || dim(to))) continue;
        drawArrow(from, to, lane, kind, selected >= 0 && (from === selected || to === selected));
      }
    }
    // Marks.
    const r = count > 3000 ? 2 : 4;
    let drawn = 0;
    const faulted = [];
    const labelEnd = new Float64Array(lanes.length).fill(-1e9);
    ctx.font = "10px system-ui, sans-serif"; ctx.textAlign = "left"; ctx.textBaseline = "bottom";
    for (let i = a; i < b; i++) {
      const row = rows[i];
      const x = X(i), y = laneY(row[LANE]);
      if (x < -10 || x > width + 10) continue;
      drawn++;
      const v = verb(row);
      ctx.globalAlpha = dim(i) ? 0.12 : 1;
      ctx.fillStyle = actorColour(row[LANE]);
      if (v === "crash") {
        ctx.strokeStyle = "#c0182b"; ctx.lineWidth = 2.5; ctx.beginPath();
        ctx.moveTo(x - 5, y - 5); ctx.lineTo(x + 5, y + 5); ctx.moveTo(x + 5, y - 5); ctx.lineTo(x - 5, y + 5); ctx.stroke();
      } else if (v === "restart") {
        ctx.fillStyle = "#1b7f3b"; ctx.beginPath();
        ctx.moveTo(x, y - 6); ctx.lineTo(x + 5, y + 4); ctx.lineTo(x - 5, y + 4); ctx.closePath(); ctx.fill();
      } else if (r <= 2) {
        ctx.fillRect(x - 1, y - 4, 2, 8);
      } else {
        ctx.beginPath(); ctx.arc(x, y, r, 0, 6.2832); ctx.fill();
      }
      if (row[FAULT] >= 0) faulted.push(i);
      if (showSlice && slice[i]) {
        ctx.strokeStyle = "#c0182b"; ctx.lineWidth = 2; ctx.beginPath(); ctx.arc(x, y, r + 3, 0, 6.2832); ctx.stroke();
      }
      if (count <= 400 && x > labelEnd[row[LANE]] && !dim(i)) {
        ctx.fillStyle = "#2d3540";
        const text = v;
        ctx.fillText(text, x + 5, y - 2);
        labelEnd[row[LANE]] = x + 8 + ctx.measureText(text).width;
      }
      ctx.globalAlpha = 1;
    }
    lastDrawn = drawn;
    // Faults on top of everything else, labels included.
    ctx.fillStyle = "#dd6b20"; ctx.strokeStyle = "#ffffff"; ctx.lineWidth = 1;
    for (const i of faulted) {
      const x = X(i), y = laneY(rows[i][LANE]);
      ctx.globalAlpha = dim(i) ? 0.25 : 1;
      ctx.beginPath();
      ctx.moveTo(x, y - 5); ctx.lineTo(x + 6, y - 14); ctx.lineTo(x - 6, y - 14); ctx.closePath(); ctx.fill(); ctx.stroke();
    }
    ctx.globalAlpha = 1;
    // The violation.
    if (violationRow >= 0) {
      const x = X(violationRow);
      ctx.strokeStyle = "#c0182b"; ctx.lineWidth = 2; ctx.setLineDash([5, 3]);
      ctx.beginPath(); ctx.moveTo(x, AXIS_H); ctx.lineTo(x, height); ctx.stroke(); ctx.setLineDash([]);
      ctx.beginPath(); ctx.arc(x, laneY(rows[violationRow][LANE]), 8, 0, 6.2832); ctx.stroke();
      ctx.fillStyle = "#c0182b"; ctx.textBaseline = "top"; ctx.font = "bold 11px system-ui, sans-serif";
      const text = "VIOLATION " + D.violation.invariant;
      // Beside the line, on whichever side has room.
      const left = x + 4 + ctx.measureText(text).width > width;
      ctx.textAlign = left ? "right" : "left";
      ctx.fillText(text, left ? x - 4 : x + 4, AXIS_H + 1);
    }
    if (selected >= 0) {
      const x = X(selected), y = laneY(rows[selected][LANE]);
      ctx.strokeStyle = "#111"; ctx.lineWidth = 2; ctx.beginPath(); ctx.arc(x, y, 8, 0, 6.2832); ctx.stroke();
    }
    if (!detailed) {
      ctx.fillStyle = "#48525e"; ctx.textAlign = "right"; ctx.textBaseline = "bottom"; ctx.font = "11px system-ui, sans-serif";
      ctx.fillText(count + " steps in view: zoom in to see hand-offs and touches", width - 6, height - 2);
    }
  }

  function drawArrow(from, to, lane, kind, hot) {
    const x1 = X(from), y1 = laneY(rows[from][LANE]);
    let x2, y2;
    if (to === null) { x2 = x1 + 6; y2 = laneY(lane); } else { x2 = X(to); y2 = laneY(rows[to][LANE]); }
    ctx.strokeStyle = hot ? "#111" : kind === "lost" ? "#c0182b" : kind === "deliver" ? "rgba(183,121,31,0.8)" : "rgba(47,85,151,0.6)";
    ctx.fillStyle = ctx.strokeStyle;
    ctx.lineWidth = hot ? 2 : 1.2;
    if (kind === "lost") ctx.setLineDash([3, 3]);
    ctx.beginPath(); ctx.moveTo(x1, y1); ctx.lineTo(x2, y2); ctx.stroke();
    ctx.setLineDash([]);
    const ang = Math.atan2(y2 - y1, x2 - x1);
    if (kind === "lost") {
      ctx.beginPath(); ctx.moveTo(x2 - 4, y2 - 4); ctx.lineTo(x2 + 4, y2 + 4); ctx.moveTo(x2 + 4, y2 - 4); ctx.lineTo(x2 - 4, y2 + 4); ctx.stroke();
      return;
    }
    const bx = x2 - 5 * Math.cos(ang), by = y2 - 5 * Math.sin(ang);
    ctx.beginPath();
    ctx.moveTo(bx, by);
    ctx.lineTo(bx - 7 * Math.cos(ang - 0.4), by - 7 * Math.sin(ang - 0.4));
    ctx.lineTo(bx - 7 * Math.cos(ang + 0.4), by - 7 * Math.sin(ang + 0.4));
    ctx.closePath(); ctx.fill();
  }

  let pending = false;
  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; draw(); });
  }

  // ---- the detail panel --------------------------------------------------
  const detail = document.getElementById("detail");
  function esc(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
  }
  function stepLink(i) {
    return '<a data-row="' + i + '">step ' + rows[i][STEP] + "</a> (" + esc(lanes[rows[i][LANE]]) + " " + esc(action(rows[i])) + ")";
  }
  function showDetail(i) {
    const r = rows[i];
    const field = (k, v) => "<tr><td>" + k + "</td><td>" + v + "</td></tr>";
    let h = "<h2>step " + r[STEP] + ": " + esc(action(r)) + "</h2><table>";
    h += field("step", r[STEP]);
    h += field("time", r[TIME] + " ms");
    h += field("actor", esc(lanes[r[LANE]]));
    h += field("action", esc(action(r)));
    h += field("outcome", esc(D.outcomes[r[OUTCOME]]));
    if (r[TASK]) h += field("task", "task-" + r[TASK] + (D.tasks[r[TASK]] ? " <span class=hint>key " + esc(D.tasks[r[TASK]].key) + "</span>" : ""));
    if (r[MESSAGE]) h += field("message", "outbox-" + r[MESSAGE] + (D.topics[r[MESSAGE]] ? " <span class=hint>" + esc(D.topics[r[MESSAGE]]) + "</span>" : ""));
    if (r[ENTRY]) h += field("entry", "entry-" + r[ENTRY]);
    if (r[ATTEMPT]) h += field("attempt", r[ATTEMPT]);
    if (r[VERSION] !== null) h += field("version", r[VERSION]);
    if (r[HASH]) h += field("hash", esc(r[HASH]) + "…");
    if (r[FAULT] >= 0) h += field("fault", '<span class="fault">' + esc(D.faults[r[FAULT]]) + "</span>");
    h += "</table>";
    if (i === violationRow) {
      h += '<h3>violation</h3><p class="violation">' + esc(D.violation.invariant) + ": " + esc(D.violation.message) + "</p>";
    } else if (slice[i]) {
      h += '<p class="violation">in the violation\'s causal slice</p>';
    }
    h += "<h3>state right after</h3><pre id=\"detail-state\">" + esc(D.states[r[STATE]] || "(no entity)") + "</pre>";
    if (touches[i].length) h += "<h3>touched</h3><p>" + touches[i].map((l) => esc(lanes[l])).join(", ") + "</p>";
    const outs = (arrowsFrom.get(i) || []).map((k) => arrows[k]);
    const ins = (arrowsTo.get(i) || []).map((k) => arrows[k]);
    if (outs.length || ins.length) {
      h += "<h3>hand-offs</h3><p>";
      for (const a of ins) h += "from " + stepLink(a[0]) + "<br>";
      for (const a of outs) {
        if (a[1] !== null) h += "to " + stepLink(a[1]) + "<br>";
        else h += (a[3] === "lost" ? "answer lost on its way to " : "answer to ") + esc(lanes[a[2]] || "a client") + "<br>";
      }
      h += "</p>";
    }
    const ids = [];
    if (r[TASK]) ids.push("task-" + r[TASK]);
    if (r[MESSAGE]) ids.push("outbox-" + r[MESSAGE]);
    if (r[ENTRY]) ids.push("entry-" + r[ENTRY]);
    if (ids.length) h += "<h3>filter to</h3><p>" + ids.map((id) => '<a data-filter="' + id + '">' + id + "</a>").join(" · ") + "</p>";
    detail.innerHTML = h;
  }
  detail.addEventListener("click", (e) => {
    const t = e.target;
    if (t.dataset.row !== undefined) select(+t.dataset.row, true);
    if (t.dataset.filter !== undefined) { filterInput.value = t.dataset.filter; applyFilter(); }
  });

  function select(i, center) {
    selected = i;
    if (i >= 0) {
      showDetail(i);
      if (center) {
        const x = X(i);
        if (x < 20 || x > width - 20) x0 = xval(i) - width / 2 / scale;
      }
    }
    redraw();
  }

  // ---- filter and search -------------------------------------------------
  const filterInput = document.getElementById("filter");
  const searchInput = document.getElementById("search");
  const filterCount = document.getElementById("filter-count");
  function applyFilter() {
    filterFn = matcher(filterInput.value);
    if (!filterFn) { filtered = null; filteredCount = n; filterCount.textContent = n + " steps"; redraw(); return; }
    filtered = new Uint8Array(n);
    filteredCount = 0;
    for (let i = 0; i < n; i++) if (filterFn(rows[i])) { filtered[i] = 1; filteredCount++; }
    filterCount.textContent = filteredCount + " of " + n + " steps match";
    redraw();
  }
  filterInput.addEventListener("input", applyFilter);
  filterInput.addEventListener("change", applyFilter);
  searchInput.addEventListener("keydown", (e) => {
    if (e.key !== "Enter") return;
    const f = matcher(searchInput.value);
    if (!f) return;
    for (let k = 1; k <= n; k++) {
      const i = (selected + k + n) % n;
      if (f(rows[i])) { select(i, true); return; }
    }
    filterCount.textContent = "no step names " + searchInput.value.trim();
  });

  // ---- zoom, pan, click --------------------------------------------------
  function zoom(factor, atX) {
    const v = x0 + atX / scale;
    const [a, b] = extent();
    const maxScale = axis === "time" ? 200 : 400;
    const minScale = (width - PAD_L - PAD_R) / (b - a) / 4;
    scale = Math.min(maxScale, Math.max(minScale, scale * factor));
    x0 = v - atX / scale;
    redraw();
  }
  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) { x0 += e.deltaX / scale; redraw(); return; }
    zoom(Math.exp(-e.deltaY * 0.002), e.offsetX);
  }, { passive: false });
  let drag = null;
  canvas.addEventListener("mousedown", (e) => { drag = { x: e.clientX, x0, moved: false }; });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x;
    if (Math.abs(dx) > 3) { drag.moved = true; canvas.classList.add("dragging"); }
    if (drag.moved) { x0 = drag.x0 - dx / scale; redraw(); }
  });
  window.addEventListener("mouseup", (e) => {
    if (!drag) return;
    const moved = drag.moved;
    drag = null;
    canvas.classList.remove("dragging");
    if (moved) return;
    const rect = canvas.getBoundingClientRect();
    const i = hit(e.clientX - rect.left, e.clientY - rect.top);
    if (i >= 0) select(i, false);
  });
  function hit(x, y) {
    const lane = Math.floor((y - AXIS_H) / LANE_H);
    if (lane < 0 || lane >= lanes.length) return -1;
    const a = Math.max(0, lowerBound(x0 + (x - 8 - (axis === "time" ? subMax * SPREAD : 0)) / scale));
    const b = Math.min(n, lowerBound(x0 + (x + 8) / scale));
    let best = -1, dist = 9;
    for (let i = a; i < b; i++) {
      if (rows[i][LANE] !== lane) continue;
      const d = Math.abs(X(i) - x);
      if (d < dist) { dist = d; best = i; }
    }
    return best;
  }
  document.getElementById("zoom-in").addEventListener("click", () => zoom(2, width / 2));
  document.getElementById("zoom-out").addEventListener("click", () => zoom(0.5, width / 2));
  document.getElementById("fit").addEventListener("click", () => { fit(); redraw(); });
  document.getElementById("slice").addEventListener("change", (e) => { showSlice = e.target.checked; redraw(); });
  document.getElementById("axis").addEventListener("change", (e) => { axis = e.target.value; fit(); redraw(); });
  window.addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT" || e.target.tagName === "SELECT") return;
    if (e.key === "+" || e.key === "=") zoom(2, width / 2);
    else if (e.key === "-") zoom(0.5, width / 2);
    else if (e.key === "0") { fit(); redraw(); }
    else if (e.key === "ArrowLeft") { x0 -= width / 4 / scale; redraw(); }
    else if (e.key === "ArrowRight") { x0 += width / 4 / scale; redraw(); }
    else if (e.key === "ArrowDown" && selected >= 0 && selected + 1 < n) select(selected + 1, true);
    else if (e.key === "ArrowUp" && selected > 0) select(selected - 1, true);
  });
  window.addEventListener("resize", () => { layout(); redraw(); });

  // ---- header, labels, legend, first paint --------------------------------
  document.getElementById("title").textContent = "sim timeline: " + D.title;
  const summary = document.getElementById("summary");
  let s = esc(D.description) + (D.description ? "<br>" : "");
  s += "seed " + D.seed + " · " + D.steps + " steps · " + D.virtualTimeMs + " ms virtual time · ";
  if (D.violation) s += '<span class="bad">VIOLATION ' + esc(D.violation.invariant) + " at step " + D.violation.step + "</span>: " + esc(D.violation.message) + " · slice: " + sliceCount + " steps";
  else if (D.notConverged.length) s += '<span class="bad">did not converge</span>: ' + esc(D.notConverged.join("; "));
  else s += '<span class="good">no violation, converged</span>';
  s += " · reproduce: <code>" + esc(D.command) + "</code>";
  summary.innerHTML = s;
  if (n < D.steps) {
    const banner = document.getElementById("banner");
    banner.hidden = false;
    banner.textContent = "This run took " + D.steps + " steps; a page holds at most " + D.stepsMax +
      ", so it shows the last " + n + " (steps " + D.firstStep + "–" + rows[n - 1][STEP] +
      "). To see the rest, cut the run: a smaller steps_max in the scenario, or fewer --steps for sim fuzz.";
  }
  const down = new Set(downs.map((d) => d[0]));
  lanes.forEach((name, l) => {
    const div = document.createElement("div");
    div.className = "lane-label" + (STORES.has(name) ? " store" : "") + (down.has(l) ? " down" : "");
    div.style.top = AXIS_H + l * LANE_H + "px";
    div.style.height = LANE_H + "px";
    div.textContent = name;
    div.dataset.lane = l;
    labels.appendChild(div);
  });
  document.getElementById("legend").innerHTML = [
    ['<i style="background:#0f766e"></i>step (colour: actor)'],
    ['<i style="background:#dd6b20;border-radius:0"></i>fault fired'],
    ['<i style="border:2px solid #c0182b;background:none"></i>violation slice'],
    ['<span style="color:#c0182b;font-weight:bold">✕</span> crash, <span style="color:#1b7f3b">▲</span> restart, shaded: down'],
    ['<i style="background:rgba(91,74,139,0.7);border-radius:0"></i>store touched'],
    ["arrows: send → API, delivery → consumer, answer → client (dashed red: lost)"],
    ["drag: pan · wheel or +/−: zoom · 0: fit · ↑↓: previous/next step"],
  ].map((x) => "<span>" + x[0] + "</span>").join("");
  filterCount.textContent = n + " steps";

  layout();
  fit();
  draw();
  // What a test (or a curious reader) can ask the page.
  window.timeline = {
    rows: n,
    lanes: lanes.length,
    arrows: arrows.length,
    slice: sliceCount,
    firstPaintMs: performance.now(),
    drawn: () => lastDrawn,
    filteredCount: () => filteredCount,
    // Where step `step` is drawn, in viewport coordinates.
    markPosition(step) {
      const i = byStep.get(step);
      if (i === undefined) return null;
      const rect = canvas.getBoundingClientRect();
      return { x: rect.left + X(i), y: rect.top + laneY(rows[i][LANE]) };
    },
    selected: () => (selected >= 0 ? rows[selected][STEP] : null),
  };
  document.body.dataset.ready = "true";
})();
