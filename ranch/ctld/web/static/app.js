// Ranch web page: polls /ui/grid.json (ETag: unchanged snapshots cost a 304), draws one cell per
// node, and drains/resumes through POST /api/v1/nodes/{name}/state with a bearer token.
"use strict";
const $ = (id) => document.getElementById(id);
const TILE_MAX = 256;  // up to this many nodes, cells are tiles with name and state
const POLL_MS = 1000 * Number(document.body.dataset.poll || 3);
let feed = null, etag = null, cells = [], selected = -1, stateFilter = "", timer = null;
let dialogAction = null;
// While the change stream is open (panes.js follow), the grid is patched from it and refetched
// whole only this rarely, for the heartbeat figures (load, memory, GPU util) no event carries.
let streamLive = false;
const FULL_MS = 60000;

const token = () => sessionStorage.getItem("ranch-token") || "";
function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (token()) h["Authorization"] = "Bearer " + token();
  return h;
}

// sinfo's long state name (with its suffix) -> the colour class of the cell.
function stateClass(name) {
  const suffix = name.slice(-1), word = name.replace(/[*~#%!$@^-]+$/, "");
  if (suffix === "~" && (word === "idle" || word === "down" || word === "drained")) return "s-power";
  if (suffix === "#" || suffix === "%") return "s-powering";
  const known = ["idle", "mixed", "allocated", "drained", "draining", "down", "fail", "failing",
                 "future", "unknown"];
  if (known.includes(word)) return "s-" + word;
  if (word === "completing") return "s-allocated";
  return "s-unknown";
}

function fmtTime(epoch) {
  if (!epoch) return "";
  const d = new Date(epoch * 1000);
  return d.toLocaleString(undefined, {year: "numeric", month: "short", day: "numeric",
                                      hour: "2-digit", minute: "2-digit"});
}

async function poll() {
  clearTimeout(timer);
  try {
    const h = headers(etag ? {"If-None-Match": etag} : {});
    const r = await fetch("/ui/grid.json", {headers: h, cache: "no-store"});
    if (r.status === 401 || r.status === 503) {
      const body = await r.json().catch(() => ({}));
      askToken(r.status === 503 ? ((body.errors || [{}])[0].error || "") : "");
      setLive(false, "needs a token");
    } else if (r.status === 304) {
      setLive(true);
    } else if (r.ok) {
      etag = r.headers.get("ETag");
      feed = await r.json();
      render();
      setLive(true);
    } else {
      setLive(false, "HTTP " + r.status);
    }
    if (r.ok || r.status === 304) { await pollJobs(); await pollReservations(); }
  } catch (e) {
    setLive(false, "controller unreachable");
  }
  timer = setTimeout(poll, streamLive ? FULL_MS : POLL_MS);
}

async function pollReservations() {
  // Maintenance windows (issue 33): shown only while there is one.
  const r = await fetch("/api/v1/reservations", {headers: headers({}), cache: "no-store"});
  if (!r.ok) return;
  const items = (await r.json()).reservations || [];
  const body = $("resv-rows");
  body.textContent = "";
  for (const x of items) {
    const tr = document.createElement("tr");
    const when = (t) => new Date(t * 1000).toLocaleString();
    for (const v of [x.name, x.state, when(x.start_time), when(x.end_time), x.nodes,
                     (x.flags || []).join(",")]) {
      const td = document.createElement("td");
      td.textContent = v;
      tr.appendChild(td);
    }
    tr.appendChild(resvActions(x));  // panes.js: Delete, for an admin
    tr.dataset.name = x.name;
    body.appendChild(tr);
  }
  if (!items.length) {
    const tr = document.createElement("tr"), td = document.createElement("td");
    td.colSpan = 7;
    td.className = "muted";
    td.textContent = "no reservation";
    tr.appendChild(td);
    body.appendChild(tr);
  }
  // shown while there is one, and to an admin, who may create one
  $("resv").hidden = items.length === 0 && !me.admin;
  $("b-resv-new").hidden = !me.admin;
}

async function pollJobs() {
  // Job counts for the header: a few bytes, asked for with every poll of the grid.
  const r = await fetch("/ui/jobs.json", {headers: headers({}), cache: "no-store"});
  if (!r.ok) return;
  const c = await r.json();
  $("jobs-running").textContent = (c.RUNNING || 0).toLocaleString();
  $("jobs-pending").textContent = (c.PENDING || 0).toLocaleString();
}

function setLive(ok, why) {
  $("live-dot").className = "dot " + (ok ? "ok" : "bad");
  $("updated").textContent = ok && feed
    ? "live · " + new Date(feed.generated_at * 1000).toLocaleTimeString()
    : (why || "…");
}

// Reads need a token from this address (HttpAuth): ask for one in the notice bar.
function askToken(why) {
  const n = $("notice");
  if (!n.hidden && n.querySelector("input")) return;
  n.textContent = "";
  const label = document.createElement("span");
  label.textContent = why ? "Tokens cannot be checked: " + why
                         : "This controller asks for a token before it shows its nodes.";
  const input = document.createElement("input");
  input.type = "password";
  input.placeholder = "token";
  input.setAttribute("aria-label", "Token");
  const go = document.createElement("button");
  go.className = "btn";
  go.textContent = "Use token";
  go.onclick = () => {
    sessionStorage.setItem("ranch-token", input.value.trim());
    n.hidden = true;
    etag = null;
    poll();
  };
  n.append(label, input, go);
  n.hidden = false;
}

function showNotice(text) {
  const n = $("notice");
  n.textContent = text || "";
  n.hidden = !text;
}

function render() {
  showNotice("");
  const nodes = feed.nodes, n = nodes.name.length;
  const grid = $("grid");
  const tiles = n <= TILE_MAX;
  grid.classList.toggle("big", n > 2000);
  grid.classList.toggle("tiles", tiles);
  const classes = feed.states.map(stateClass);
  if (cells.length !== n || grid.dataset.names !== String(n) + nodes.name[0]) {
    // One string parsed at once: ten times quicker than a createElement and four attribute
    // writes per cell at 10,000 nodes; paintCell then finds every cell already right.
    const html = new Array(n);
    for (let i = 0; i < n; i++) {
      const name = esc(nodes.name[i]), st = esc(feed.states[nodes.state[i]]);
      html[i] = `<div class="${cellClass(i, classes)}" data-i="${i}" role="listitem" ` +
        `title="${name} · ${st}" data-name="${name}" data-state="${st}">` +
        (tiles ? `<b>${name}</b><span>${st}</span>` : "") + "</div>";
    }
    grid.innerHTML = html.join("");
    cells = Array.from(grid.children);
    grid.dataset.names = String(n) + nodes.name[0];
    performance.mark("ranch-grid-built");  // bench/page_bench.py reads it
  } else {
    for (let i = 0; i < n; i++) paintCell(i, classes, tiles);
  }
  $("total").textContent = n.toLocaleString();
  summarise(classes);
  fillSelect($("f-part"), feed.partitions.map((p) => p.name));
  applyFilters();
  if (selected >= 0) showPanel(selected, false);
}

// One cell from the feed (render: every cell; a change from the stream: the cells it names).
function cellClass(i, classes) {
  const nodes = feed.nodes, s = nodes.state[i];
  let cls = "c " + classes[s];
  if (feed.states[s].endsWith("*")) cls += " nr";
  if (nodes.health[i] > 0) cls += " hw";
  if (i === selected) cls += " sel";
  return cls;
}

const esc = (t) => String(t).replace(/[&<>"]/g, (ch) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})[ch]);

function paintCell(i, classes, tiles) {
  const nodes = feed.nodes, s = nodes.state[i], cls = cellClass(i, classes);
  const c = cells[i];
  if (c.className !== cls) c.className = cls;
  const title = nodes.name[i] + " · " + feed.states[s];
  if (c.title !== title) c.title = title;
  if (tiles && c.firstChild && c.firstChild.textContent !== nodes.name[i]) {
    c.firstChild.textContent = nodes.name[i];
  }
  if (tiles && c.lastChild && c.lastChild.textContent !== feed.states[s]) {
    c.lastChild.textContent = feed.states[s];
  }
  if (c.dataset.name !== nodes.name[i]) c.dataset.name = nodes.name[i];
  if (c.dataset.state !== feed.states[s]) c.dataset.state = feed.states[s];
}

// The header's figures: nodes per state (the chips), CPUs allocated; no cell is touched.
function summarise(classes) {
  const nodes = feed.nodes, n = nodes.name.length;
  const counts = new Array(feed.states.length).fill(0);
  let alloc = 0, total = 0;
  for (let i = 0; i < n; i++) {
    counts[nodes.state[i]]++;
    alloc += nodes.cpus[i][0];
    total += nodes.cpus[i][1];
  }
  $("cpu-use").textContent = total ? Math.round(100 * alloc / total) + "%" : "–";
  renderCounts(counts, classes);
  fillSelect($("f-state"), feed.states);
}

function renderCounts(counts, classes) {
  const box = $("counts");
  box.textContent = "";
  const order = counts.map((c, i) => i).sort((a, b) => counts[b] - counts[a]);
  for (const i of order) {
    if (!counts[i]) continue;
    const chip = document.createElement("button");
    chip.className = "chip" + (stateFilter === feed.states[i] ? " on" : "");
    chip.dataset.state = feed.states[i];
    chip.innerHTML = `<span class="sw ${classes[i]}"></span><span></span><b></b>`;
    chip.children[1].textContent = feed.states[i];
    chip.children[2].textContent = counts[i].toLocaleString();
    chip.onclick = () => {
      stateFilter = stateFilter === feed.states[i] ? "" : feed.states[i];
      $("f-state").value = stateFilter;
      render();
    };
    box.appendChild(chip);
  }
}

function fillSelect(sel, values) {
  const want = ["", ...values].join("\n");
  if (sel.dataset.values === want) return;
  const keep = sel.value;
  sel.length = 1;
  for (const v of values) sel.add(new Option(v, v));
  sel.value = values.includes(keep) ? keep : "";
  sel.dataset.values = want;
}

function applyFilters() {
  if (!feed) return;
  const part = $("f-part").value, text = $("f-name").value.trim().toLowerCase();
  stateFilter = $("f-state").value;
  let members = null;
  if (part) {
    const p = feed.partitions.find((x) => x.name === part);
    members = new Set(p ? p.members : []);
  }
  let shown = 0;
  for (let i = 0; i < cells.length; i++) {
    const ok = (!members || members.has(i)) &&
      (!stateFilter || feed.states[feed.nodes.state[i]] === stateFilter) &&
      (!text || feed.nodes.name[i].toLowerCase().includes(text));
    cells[i].classList.toggle("hidden", !ok);
    shown += ok;
  }
  $("shown").textContent = shown === cells.length ? "" : `${shown.toLocaleString()} shown`;
  for (const chip of $("counts").children) chip.classList.toggle("on", chip.dataset.state === stateFilter);
}

function pctBar(v, unit) {
  if (v < 0) return "<span class='muted'>no data</span>";
  // the width is set through the CSSOM (sizeBars): the page's CSP allows no inline style
  return `${v}${unit}<div class="bar"><i data-pct="${Math.min(100, v)}"></i></div>`;
}

function sizeBars(root) {
  for (const bar of root.querySelectorAll("i[data-pct]")) bar.style.width = bar.dataset.pct + "%";
}

let detailFor = "";  // "name state" of the node panel's last detail (jobs.js loadNodeDetail)

function showPanel(i, fetchDetail = true) {
  if (cells[selected]) cells[selected].classList.remove("sel");
  selected = i;
  cells[i].classList.add("sel");
  const nodes = feed.nodes, st = feed.states[nodes.state[i]];
  $("panel").hidden = false;
  $("p-name").textContent = nodes.name[i];
  const badge = $("p-state");
  badge.textContent = st;
  badge.className = "badge " + stateClass(st);
  const temp = nodes.temp[i] < 0 ? "<span class='muted'>no data</span>" : nodes.temp[i] + " °C";
  const age = nodes.age[i] < 0 ? "never" : nodes.age[i] + " s ago";
  $("p-facts").innerHTML =
    `<dt>CPUs</dt><dd>${nodes.cpus[i][0]} / ${nodes.cpus[i][1]} allocated</dd>` +
    `<dt>CPU load</dt><dd>${pctBar(nodes.cpu[i], "%")}</dd>` +
    `<dt>Memory</dt><dd>${pctBar(nodes.mem[i], "%")}</dd>` +
    `<dt>GPU util</dt><dd>${nodes.gpu[i] < 0 ? "<span class='muted'>no GPUs</span>" : pctBar(nodes.gpu[i], "%")}</dd>` +
    `<dt>Hottest</dt><dd>${temp}</dd>` +
    `<dt>Heartbeat</dt><dd>${age}</dd>` +
    `<dt>Partitions</dt><dd id="p-parts"></dd>`;
  sizeBars($("p-facts"));
  $("p-parts").textContent = feed.partitions.filter((p) => p.members.includes(i))
    .map((p) => p.name).join(", ") || "—";
  const r = nodes.reason[i], box = $("p-reason");
  box.hidden = r < 0;
  if (r >= 0) {
    const [text, user, time, source] = feed.reasons[r];
    box.textContent = text;
    const small = document.createElement("small");
    small.textContent = `${user} · ${fmtTime(time)}${source ? " · " + source.toLowerCase().replace("_", " ") : ""}`;
    box.appendChild(small);
  }
  const note = feed.notes[nodes.health[i]], list = $("p-health");
  list.hidden = !note;
  if (fetchDetail || detailFor !== nodes.name[i] + " " + st) {
    detailFor = nodes.name[i] + " " + st;
    loadNodeDetail(nodes.name[i]);
  }
  list.textContent = "";
  for (const w of (note || "").split("; ").filter(Boolean)) {
    const li = document.createElement("li");
    li.textContent = w;
    list.appendChild(li);
  }
}

function openDialog(kind) {
  const name = feed.nodes.name[selected];
  dialogAction = {kind, name};
  $("dlg-title").textContent = (kind === "DRAIN" ? "Drain " : "Resume ") + name;
  $("dlg-ok").textContent = kind === "DRAIN" ? "Drain" : "Resume";
  $("dlg-ok").className = "btn" + (kind === "DRAIN" ? " warn" : "");
  $("dlg-reason").value = "";
  $("dlg-token").value = token();
  $("dlg-error").hidden = true;
  $("dlg").showModal();
  $("dlg-reason").focus();
}

async function submitDialog(ev) {
  ev.preventDefault();
  const reason = $("dlg-reason").value.trim(), tok = $("dlg-token").value.trim();
  const err = $("dlg-error");
  if (dialogAction.kind === "DRAIN" && !reason) {
    err.textContent = "A reason is required to drain a node.";
    err.hidden = false;
    return;
  }
  if (tok) sessionStorage.setItem("ranch-token", tok);
  const body = {state: dialogAction.kind};
  if (reason) body.reason = reason;
  const r = await fetch(`/api/v1/nodes/${encodeURIComponent(dialogAction.name)}/state`, {
    method: "POST", headers: headers({"Content-Type": "application/json"}),
    body: JSON.stringify(body)});
  const doc = await r.json().catch(() => ({}));
  if (!r.ok) {
    err.textContent = ((doc.errors || [])[0] || {}).error || "HTTP " + r.status;
    err.hidden = false;
    return;
  }
  $("dlg").close();
  etag = null;
  poll();
}

$("grid").addEventListener("click", (e) => {
  const cell = e.target.closest(".c");
  const i = cell && cell.dataset.i;
  if (i !== undefined) showPanel(Number(i));
});
// Keyboard: the grid is one tab stop; arrows move among the shown nodes, Enter/Space opens one.
$("grid").addEventListener("keydown", (e) => {
  if (!feed || !cells.length) return;
  const shown = cells.filter((c) => !c.classList.contains("hidden"));
  if (!shown.length) return;
  const at = shown.indexOf(cells[selected]);
  const perRow = Math.max(1, Math.round($("grid").clientWidth / (shown[0].offsetWidth + 3)));
  const step = {ArrowRight: 1, ArrowLeft: -1, ArrowDown: perRow, ArrowUp: -perRow}[e.key];
  if (step !== undefined) {
    e.preventDefault();
    const next = shown[Math.min(shown.length - 1, Math.max(0, at < 0 ? 0 : at + step))];
    showPanel(Number(next.dataset.i));
  } else if ((e.key === "Enter" || e.key === " ") && at < 0) {
    e.preventDefault();
    showPanel(Number(shown[0].dataset.i));
  }
});
$("p-close").onclick = () => {
  $("panel").hidden = true;
  if (cells[selected]) cells[selected].classList.remove("sel");
  selected = -1;
};
$("b-drain").onclick = () => openDialog("DRAIN");
$("b-resume").onclick = () => openDialog("RESUME");
$("dlg-cancel").onclick = () => $("dlg").close();
$("dlg-form").addEventListener("submit", submitDialog);
for (const id of ["f-part", "f-state"]) $(id).addEventListener("change", applyFilters);
$("f-name").addEventListener("input", applyFilters);
poll();
