// Ranch web page, part four: the Usage tab (/ui/usage): the association tree with rshare's
// records (`rshare -a --json`), usage over time (one sample per PriorityCalcPeriod, drawn as an
// SVG chart), and the pending jobs a QOS or association limit holds. Uses app.js's ($, headers,
// fmtTime) and jobs.js's (el, row, jobLink) helpers.
"use strict";
let usageAsked = 0, usageDoc = null;
const COLOURS = ["#2f6fde", "#e8912d", "#34a56f", "#d9534f", "#9b87d6", "#58a6e6", "#8e2a2a",
                 "#f2c14e", "#4c5b6b", "#c05fb0"];
const SVG = "http://www.w3.org/2000/svg";
const f6 = (v) => (v === null || v === undefined ? "" : Number(v).toFixed(6));

function shareCells(s) {  // sshare's fields as rshare prints them (cli/share_rows.py field)
  const root = s.raw_shares === -1;
  return [" ".repeat(s.depth) + s.account, s.user,
          root ? "" : s.raw_shares === 0x7FFFFFFF ? "parent" : String(s.raw_shares),
          f6(root ? 0 : s.norm_shares), String(Math.trunc(s.raw_usage)),
          root ? "" : f6(s.norm_usage), f6(root ? 1 : s.effective_usage), f6(s.fairshare),
          root ? "" : s.level_fs === null ? "inf" : f6(s.level_fs), s.tres_run_mins];
}

function drawChart(hist) {
  const svg = $("u-chart"), legend = $("u-legend");
  svg.textContent = "";
  legend.textContent = "";
  const W = 720, H = 220, L = 64, R = 12, T = 12, B = 28;
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };
  const times = hist.times;
  if (!times.length) {
    add("text", {x: W / 2, y: H / 2, "text-anchor": "middle", class: "chart-empty"},
        "no sample yet: the first comes at the next PriorityCalcPeriod");
    return;
  }
  const t0 = times[0], t1 = times[times.length - 1] > t0 ? times[times.length - 1] : t0 + 1;
  let top = 0;
  for (const s of hist.series) for (const v of s.values) if (v !== null && v > top) top = v;
  top = top > 0 ? top * 1.1 : 1;
  const x = (t) => L + (W - L - R) * (t - t0) / (t1 - t0);
  const y = (v) => T + (H - T - B) * (1 - v / top);
  add("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis"});
  add("line", {x1: L, y1: T, x2: L, y2: H - B, class: "axis"});
  for (const frac of [0, 0.5, 1]) {
    const v = top / 1.1 * frac;
    add("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "tick"},
        Math.round(v).toLocaleString());
  }
  add("text", {x: L, y: H - 8, class: "tick"}, fmtTime(t0));
  add("text", {x: W - R, y: H - 8, "text-anchor": "end", class: "tick"}, fmtTime(t1));
  hist.series.forEach((s, i) => {
    const colour = COLOURS[i % COLOURS.length];
    const pts = [];
    s.values.forEach((v, j) => { if (v !== null) pts.push(`${x(times[j]).toFixed(1)},${y(v).toFixed(1)}`); });
    const name = s.user ? `${s.account} / ${s.user}` : s.account;
    if (pts.length === 1) add("circle", {cx: pts[0].split(",")[0], cy: pts[0].split(",")[1], r: 3, fill: colour});
    else add("polyline", {points: pts.join(" "), fill: "none", stroke: colour, "stroke-width": 2})
      .appendChild(document.createElementNS(SVG, "title")).textContent = name;
    const li = el("li");
    const sw = el("span", null, "swatch");
    sw.dataset.colour = colour;
    const mark = document.createElementNS(SVG, "svg");
    mark.setAttribute("width", "12"); mark.setAttribute("height", "12");
    const rect = document.createElementNS(SVG, "rect");
    for (const [k, v] of Object.entries({width: 12, height: 12, rx: 2, fill: colour})) rect.setAttribute(k, v);
    mark.appendChild(rect);
    sw.appendChild(mark);
    li.append(sw, el("span", name), el("span", Math.trunc(s.values[s.values.length - 1] || 0).toLocaleString(), "muted"));
    li.dataset.series = name;
    legend.appendChild(li);
  });
}

function renderUsage() {
  const doc = usageDoc;
  if (!doc) return;
  const acct = $("u-account").value.trim().toLowerCase(), user = $("u-user").value.trim();
  const body = $("u-share-rows");
  body.textContent = "";
  let shown = 0;
  for (const s of doc.shares) {
    if (acct && s.account.toLowerCase() !== acct) continue;
    if (user && s.user && s.user !== user) continue;
    const tr = row(shareCells(s));
    tr.firstChild.classList.add("tree");
    tr.dataset.account = s.account;
    tr.dataset.user = s.user;
    body.appendChild(tr);
    shown++;
  }
  if (!shown) {
    const tr = row([doc.enabled ? "no association matches" : "the accounting store is off (AccountingStorageType)"]);
    tr.firstChild.colSpan = 10;
    body.appendChild(tr);
  }
  $("u-shown").textContent = `${shown} of ${doc.shares.length} associations`;
  drawChart(doc.history);
  const lim = $("u-limit-rows");
  lim.textContent = "";
  for (const g of doc.limits) {
    const ids = el("span");
    g.job_ids.forEach((id, i) => { if (i) ids.append(", "); ids.appendChild(jobLink(id)); });
    if (g.jobs > g.job_ids.length) ids.append(` … (${g.jobs - g.job_ids.length} more)`);
    const tr = row([g.qos || "—", g.account || "—", g.reason, g.jobs, g.users.join(", "), ids]);
    tr.dataset.reason = g.reason;
    lim.appendChild(tr);
  }
  if (!doc.limits.length) {
    const tr = row(["no pending job is held by a limit"]);
    tr.firstChild.colSpan = 6;
    lim.appendChild(tr);
  }
}

async function loadUsage() {
  const asked = ++usageAsked;
  const r = await fetch("/ui/usage", {headers: headers({}), cache: "no-store"});
  const doc = await r.json().catch(() => ({}));
  if (asked !== usageAsked) return;
  const note = $("u-note");
  if (!r.ok) {
    note.textContent = ((doc.errors || [])[0] || {}).error || "HTTP " + r.status;
    note.hidden = false;
    return;
  }
  note.textContent = doc.hidden || "";
  note.hidden = !doc.hidden;
  usageDoc = doc;
  renderUsage();
}

for (const id of ["u-account", "u-user"]) $(id).addEventListener("input", renderUsage);
$("u-form").addEventListener("submit", (ev) => ev.preventDefault());
if (location.hash === "#usage") loadUsage();
