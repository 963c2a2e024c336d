// The Streams page: the list of streams and a page per stream, refreshed every 5 s.
// Every request is relative to this page and carries Airflow's session cookie (same origin).
"use strict";

const REFRESH_MS = 5000;
let timer = null;

const $ = (sel) => document.querySelector(sel);
const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const time = (iso) => (iso ? iso.replace("T", " ").replace(/(\.\d{3})\d*/, "$1").replace("+00:00", "Z") : "-");
const num = (v) => (v === null || v === undefined ? "-" : Number(v).toLocaleString());
const rate = (v) => (v === null || v === undefined ? "-" : Number(v).toFixed(2));
const millis = (v) => (v === null || v === undefined ? "-" : v < 10000 ? `${Math.round(v)} ms` : secs(v / 1000));
const pct = (v) => (v === null || v === undefined ? "-" : `${Math.round(v)}%`);
const secs = (v) => (v === null || v === undefined ? "-" : v < 120 ? `${v.toFixed(1)} s` : `${(v / 60).toFixed(1)} min`);

async function getJson(path, options) {
  const response = await fetch(path, {credentials: "same-origin", ...options});
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const detail = Array.isArray(body.detail) ? body.detail.map((d) => `${(d.loc || []).slice(-1)[0]}: ${d.msg}`).join("; ") : body.detail;
    throw new Error(detail || `HTTP ${response.status}`);
  }
  return body;
}

function showError(err) {
  const box = $("#error");
  box.hidden = !err;
  box.textContent = err ? `Could not load: ${err.message}` : "";
}

function route() {
  const match = location.hash.match(/^#\/([^/]+)\/([^/]+)$/);
  return match ? {db: decodeURIComponent(match[1]), name: decodeURIComponent(match[2])} : null;
}

async function refresh() {
  clearTimeout(timer);
  const target = route();
  $("#list-view").hidden = !!target;
  $("#detail-view").hidden = !target;
  $("#crumb").textContent = target ? ` / ${target.db}.${target.name}` : "";
  try {
    if (target) {
      await renderStream(target.db, target.name);
    } else {
      await renderList();
    }
    showError(null);
    $("#updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    showError(err);
  }
  timer = setTimeout(refresh, REFRESH_MS);
}

async function renderList() {
  const data = await getJson("api/streams");
  const rows = data.streams.map((s) => `
    <tr data-stream="${esc(s.db_name)}.${esc(s.stream_name)}">
      <td><a href="#/${encodeURIComponent(s.db_name)}/${encodeURIComponent(s.stream_name)}">${esc(s.db_name)}.${esc(s.stream_name)}</a></td>
      <td><span class="status ${esc(s.status)}">${esc(s.status)}</span></td>
      <td>${esc(s.trigger)}</td>
      <td>${esc(s.language)}</td>
      <td>${time(s.progress)}</td>
      <td class="num">${secs(s.lag_s)}</td>
      <td data-col="freshness">${freshness(s)}</td>
      <td class="num" data-col="input-rate">${rate(s.input_rows_per_sec_1m)}</td>
      <td class="num" data-col="output-rate">${rate(s.output_rows_per_sec_1m)}</td>
      <td class="num" data-col="latency">${millis(s.runner_result_latency_avg_1m_ms)}</td>
      <td class="num" data-col="history">${pct(s.history_progress_pct)}</td>
      <td data-col="next-instant">${time(s.next_instant)}</td>
      <td class="num">${num(s.windows_opened)} / ${num(s.windows_closed)}</td>
      <td class="num" data-col="computations">${num(s.computations)}</td>
      <td class="num">${num(s.recalculations)}${s.recalc_ratio !== null ? ` (${(s.recalc_ratio * 100).toFixed(1)}%)` : ""}</td>
      <td class="num">${num(s.notify_sent)} / ${num(s.notify_dropped)} / ${num(s.notify_pending)}</td>
      <td class="error">${esc(s.last_error)}</td>
    </tr>`);
  $("#streams tbody").innerHTML = rows.join("");
  $("#empty").hidden = data.streams.length > 0;
  await renderTriggers();
}

async function renderTriggers() {
  const data = await getJson("api/triggers");
  const rows = data.triggers.map((t) => `
    <tr data-trigger="${esc(t.TriggerName)}">
      <td>${esc(t.TriggerName)}</td><td>${esc(t.Event)}</td><td>${esc(t.Type)}</td><td>${esc(t.State)}</td>
      <td><code>${esc(t.PathPattern)}</code></td><td><code>${esc(t.ClassName)}</code></td><td>${esc(t.NodeId)}</td>
      <td class="num" data-col="fires">${num(t.Fired)} / ${num(t.Failed)}</td>
      <td class="error">${esc(t.LastError)}</td>
    </tr>`);
  $("#triggers tbody").innerHTML = rows.join("");
  $("#no-triggers").hidden = data.triggers.length > 0;
}

// ok, late or silent against the stream's freshness bound (nothing without one)
function freshness(s) {
  if (!s.freshness) return "";
  const why = s.freshness_detail ? `: ${s.freshness_detail}` : "";
  return `<span class="freshness ${esc(s.freshness)}" title="${esc(`bound ${secs(s.freshness_bound_s)}${why}`)}">${esc(s.freshness)}</span>`;
}

function card(key, value) {
  return `<div class="card"><div class="k">${esc(key)}</div><div class="v">${value}</div></div>`;
}

async function renderStream(db, name) {
  const data = await getJson(`api/streams/${encodeURIComponent(db)}/${encodeURIComponent(name)}`);
  const s = data.stream;
  $("#cards").innerHTML = [
    card("status", `<span class="status ${esc(s.status)}">${esc(s.status)}</span>`),
    card("trigger", esc(s.trigger)),
    card("language", esc(s.language)),
    card("detector engine", esc(s.engine ?? "none")),
    card("created", time(s.create_time)),
    card("progress", time(s.progress)),
    card("lag", secs(s.lag_s)),
    ...(s.freshness ? [card("freshness", `${freshness(s)} (bound ${secs(s.freshness_bound_s)})`)] : []),
    card("rows in / out per s (1 min)", `${rate(s.input_rows_per_sec_1m)} / ${rate(s.output_rows_per_sec_1m)}`),
    card("result latency (1 min)", millis(s.runner_result_latency_avg_1m_ms)),
    card("history", pct(s.history_progress_pct)),
    card("next instant", time(s.next_instant)),
    card("windows opened / closed", `${num(s.windows_opened)} / ${num(s.windows_closed)}`),
    card("computations", num(s.computations)),
    card("recalculations", num(s.recalculations)),
    card("notifications sent / dropped / pending", `${num(s.notify_sent)} / ${num(s.notify_dropped)} / ${num(s.notify_pending)}`),
    card("DAG", `<a href="../dags/${encodeURIComponent(data.dag_id)}" target="_top">${esc(data.dag_id)}</a>`),
  ].join("") + (s.last_error ? `<p class="error" data-testid="last-error">${esc(s.last_error)}</p>` : "")
    + (s.freshness_detail ? `<p class="error" data-testid="freshness-detail">${esc(s.freshness)}: ${esc(s.freshness_detail)}</p>` : "");
  $("#sql").textContent = data.sql;
  renderProgress(data.progress);
  lineChart($("#lag-chart"), data.lag.filter((p) => p.lag_s !== null).map((p) => [Date.parse(p.at), p.lag_s]));
  barChart($("#windows-chart"), data.windows.map((p) => [Date.parse(p.at), p.windows]));
  $("#events tbody").innerHTML = data.events.map((e) => `
    <tr><td>${esc(e.event_type)}</td><td>${esc(e.group_keys === "{}" ? "-" : e.group_keys)}</td><td>${time(e.window_start)}</td>
        <td>${time(e.window_end)}</td><td class="num">${num(e.row_count)}</td><td>${esc(e.trigger_id)}</td></tr>`).join("");
  renderRecalculations(data.recalculations);
  const form = $("#recalculate");
  form.hidden = !data.recalc_dag_id;
  $("#recalc-note").textContent = data.recalc_dag_id
    ? `Creates a backfill of ${data.recalc_dag_id} over [from, to): the windows that start in it are computed again from the table as it is now.`
    : s.language.startsWith("IoTDB")
      ? `A continuous query recomputes past ranges with a backfill of its own DAG: airflow backfill create --dag-id ${data.dag_id} --from-date ... --to-date ...`
      : "PERIOD streams, and streams in TDengine's syntax before 3.3.7 (which has no RECALCULATE), are not recalculated.";
  form.dataset.db = db;
  form.dataset.name = name;
  $("#verify").dataset.db = db;
  $("#verify").dataset.name = name;
}

// the stream's recalculation requests (ins_stream_recalculates), newest first
function renderRecalculations(found) {
  $("#recalcs tbody").innerHTML = found.map((r) => `
    <tr data-recalc="${esc(r.recalc_id)}"><td>${esc(r.recalc_id)}</td><td>${esc(r.reason)}</td><td>${time(r.start)}</td>
        <td>${time(r.end)}</td><td>${time(r.request_time)}</td>
        <td data-col="status"><span class="status ${esc(String(r.status).toLowerCase())}">${esc(r.status)}</span></td>
        <td class="num" data-col="progress">${esc(r.progress)}</td><td class="error">${esc(r.message)}</td></tr>`).join("");
  $("#recalcs").hidden = found.length === 0;
  $("#no-recalcs").hidden = found.length > 0;
}

function renderProgress(p) {
  const box = $("#progress");
  const recent = p && (!p.finished || Date.now() - Date.parse(p.updated) < 10 * 60 * 1000);
  box.hidden = !recent;
  if (!recent) return;
  box.querySelector(".fill").style.width = `${(p.fraction * 100).toFixed(1)}%`;
  box.querySelector(".label").textContent = p.line;
}

const clock = (ms) => new Date(ms).toISOString().slice(11, 19) + "Z";

function yScale(points, h) {
  const y1 = Math.max(1, ...points.map((p) => p[1]));
  return {y: (y) => h - 16 - (y / y1) * (h - 30), y1};
}

function axes(y1, first, last, w, h) {
  return `<text x="2" y="12">${y1.toFixed(y1 < 10 ? 1 : 0)}</text><text x="2" y="${h - 16}">0</text>` +
    `<text x="30" y="${h - 2}">${clock(first)}</text>` +
    `<text x="${w - 60}" y="${h - 2}">${clock(last)}</text>`;
}

// lag samples over time: a line through them, with a dot at each
function lineChart(svg, points) {
  const w = 480, h = 160;
  if (!points.length) { svg.innerHTML = `<text x="10" y="80">no samples yet</text>`; delete svg.dataset.points; return; }
  const x0 = points[0][0], x1 = points[points.length - 1][0];
  const x = (t) => (x1 === x0 ? (w + 20) / 2 : 30 + ((t - x0) / (x1 - x0)) * (w - 40));
  const s = yScale(points, h);
  const d = points.map((p, i) => `${i ? "L" : "M"}${x(p[0]).toFixed(1)},${s.y(p[1]).toFixed(1)}`).join(" ");
  const dots = points.map((p) => `<circle class="dot" r="2.5" cx="${x(p[0]).toFixed(1)}" cy="${s.y(p[1]).toFixed(1)}"><title>${clock(p[0])}: ${p[1].toFixed(1)} s</title></circle>`).join("");
  svg.innerHTML = `<path class="line" d="${d}"></path>${dots}` + axes(s.y1, x0, x1, w, h);
  svg.dataset.points = String(points.length);
}

// closed windows per minute: one bar per minute that has any, in time order
function barChart(svg, points) {
  const w = 480, h = 160;
  if (!points.length) { svg.innerHTML = `<text x="10" y="80">no closed windows yet</text>`; delete svg.dataset.points; return; }
  const s = yScale(points, h);
  const slot = (w - 40) / points.length;
  const width = Math.max(1, Math.min(40, slot - 2));
  svg.innerHTML = points.map((p, i) => `<rect class="bar" x="${(30 + i * slot + (slot - width) / 2).toFixed(1)}" y="${s.y(p[1]).toFixed(1)}" width="${width.toFixed(1)}" height="${(h - 16 - s.y(p[1])).toFixed(1)}"><title>${clock(p[0])}: ${p[1]}</title></rect>`).join("") +
    axes(s.y1, points[0][0], points[points.length - 1][0], w, h);
  svg.dataset.points = String(points.length);
}

$("#recalculate").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const out = $("#recalc-result");
  out.className = "";
  out.textContent = "creating the backfill…";
  const utc = (v) => (v.length === 16 ? `${v}:00` : v) + "+00:00";
  try {
    const body = await getJson(`api/streams/${encodeURIComponent(form.dataset.db)}/${encodeURIComponent(form.dataset.name)}/recalculate`, {
      method: "POST",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({start: utc(form.start.value), end: utc(form.end.value)}),
    });
    out.className = "ok";
    out.textContent = body.message;
  } catch (err) {
    out.className = "bad";
    out.textContent = err.message;
  }
});

$("#verify").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const out = $("#verify-result");
  const table = $("#differences");
  out.className = "";
  out.textContent = "verifying…";
  table.hidden = true;
  const utc = (v) => (v ? (v.length === 16 ? `${v}:00` : v) + "+00:00" : null);
  try {
    const body = await getJson(`api/streams/${encodeURIComponent(form.dataset.db)}/${encodeURIComponent(form.dataset.name)}/verify`, {
      method: "POST",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({start: utc(form.start.value), end: utc(form.end.value), repair: form.repair.checked}),
    });
    out.className = body.equal ? "ok" : "bad";
    out.textContent = body.summary;
    $("#differences tbody").innerHTML = body.differences.map((d) => `
      <tr><td>${esc(d.status)}</td><td>${esc(d.table)}</td><td>${time(d.ts)}</td><td>${esc(d.trigger_id)}</td>
          <td>${esc(d.columns.join(", "))}</td><td>${esc(JSON.stringify(d.old))}</td><td>${esc(JSON.stringify(d.new))}</td></tr>`).join("");
    table.hidden = body.differences.length === 0;
  } catch (err) {
    out.className = "bad";
    out.textContent = err.message;
  }
});

window.addEventListener("hashchange", refresh);
refresh();
