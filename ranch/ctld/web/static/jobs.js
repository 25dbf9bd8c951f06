// Ranch web page, part two: the node panel's detail (valid actions, jobs, GPUs from
// /ui/node/NAME), the job queue (/ui/queue: the records of `rqueue --json`, then only what
// changed since the listing held), a job's page
// (/ui/job/ID) with the commands its reader may give, and the token sign-in. Uses app.js's
// globals ($, headers, token, feed, selected, POLL_MS, stateClass, fmtTime).
"use strict";
let queue = [], queueNow = 0, sortKey = "job_id", sortUp = true, viewTimer = null;
// The queue held, by job id, and the server's mark of it: each poll asks what changed since.
let queueById = new Map(), queueMark = "";
// The queue draws this many rows, then more on request: 10,000 rows took the Jobs tab a second
// to lay out (the filters, the sort and the counts still cover every job).
const QUEUE_PAGE = 500;
let queueRows = QUEUE_PAGE;

const el = (tag, text, cls) => {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
};
const num = (o) => (o && o.set && !o.infinite ? o.number : null);
function dur(s) {
  if (s === null || s === undefined || s < 0) return "";
  s = Math.floor(s);
  const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
  const hms = [h, m, s % 60].map((x) => String(x).padStart(2, "0")).join(":");
  return d ? `${d}-${hms}` : hms;
}
const limitText = (o) => (o && o.infinite ? "UNLIMITED" : num(o) === null ? "" : dur(60 * num(o)));
function row(cells) {
  const tr = el("tr");
  for (const c of cells) {
    const td = el("td");
    if (c instanceof Node) td.appendChild(c); else td.textContent = c === null ? "" : String(c);
    tr.appendChild(td);
  }
  if (cells.length === 1) tr.firstChild.colSpan = 8;  // "none": across the table
  return tr;
}
const jobLink = (id) => { const a = el("a", id); a.href = "#job/" + id; return a; };

// -- the node panel's detail -------------------------------------------------------------------
let detailAsked = 0;  // only the latest answer is drawn (a node changes twice in a row)
async function loadNodeDetail(name) {
  const asked = ++detailAsked;
  const r = await fetch("/ui/node/" + encodeURIComponent(name), {headers: headers({}),
                                                                  cache: "no-store"});
  if (asked !== detailAsked) return;
  if (!r.ok || selected < 0 || feed.nodes.name[selected] !== name) return;
  const d = await r.json();
  $("b-drain").hidden = !d.actions.includes("DRAIN");
  $("b-resume").hidden = !d.actions.includes("RESUME");
  $("b-reboot").hidden = !d.actions.includes("REBOOT");
  $("p-noact").textContent = !d.may_write ? "changing nodes needs an admin's token"
    : d.actions.length ? "" : "no request applies in this state";
  const jobs = $("p-jobs");
  jobs.textContent = "";
  for (const j of d.jobs) {
    const el_ = j.start_time ? Date.now() / 1000 - j.start_time : null;
    const lim = j.time_limit === null ? "UNLIMITED" : dur(60 * j.time_limit);
    jobs.appendChild(row([jobLink(j.job_id), j.user, j.state, j.gpus.join(",") || "—",
                          `${dur(el_)} / ${lim}`]));
  }
  if (!d.jobs.length) jobs.appendChild(row([d.hidden_jobs ? "hidden by PrivateData" : "none"]));
  const gpus = $("p-gpus");
  gpus.textContent = "";
  for (const g of d.gpus) {
    const mem = g.mem_used_mib === null ? "" : `${g.mem_used_mib} / ${g.mem_total_mib} MiB`;
    // a job the reader may not see (PrivateData=jobs) holds it: "held", no id
    const holder = g.job === null ? "free" : typeof g.job === "number" ? jobLink(g.job) : g.job;
    gpus.appendChild(row([g.index, g.model, holder,
                          g.util_pct === null ? "" : Math.round(g.util_pct) + " %", mem,
                          g.temp_c === null ? "" : Math.round(g.temp_c) + " °C", g.health]));
  }
  if (!d.gpus.length) gpus.appendChild(row(["none"]));
}

// -- views ------------------------------------------------------------------------------------
function route() {
  const h = location.hash, job = h.match(/^#job\/(\d+)$/);
  const views = ["nodes", "jobs", "job", "history", "events", "usage"];
  const view = job ? "job" : views.includes(h.slice(1)) ? h.slice(1) : "nodes";
  for (const v of views) $("view-" + v).hidden = v !== view;
  for (const t of ["nodes", "jobs", "history", "events", "usage"]) {
    $("tab-" + t).toggleAttribute("aria-current", t === (view === "job" ? "jobs" : view));
  }
  clearTimeout(viewTimer);
  $("jd-error").hidden = true;
  if (view === "jobs") loadQueue();
  if (job) loadJob(job[1]);
  if (view === "history") loadHistory();
  if (view === "events") loadEvents();
  if (view === "usage" && typeof loadUsage === "function") loadUsage();  // usage.js
}

async function loadQueue() {
  clearTimeout(viewTimer);
  const since = queueMark ? "?since=" + encodeURIComponent(queueMark) : "";
  const r = await fetch("/ui/queue" + since, {headers: headers({}), cache: "no-store"});
  if (r.ok) {
    const doc = await r.json();
    if (doc.full) queueById = new Map();
    for (const j of doc.jobs) queueById.set(j.job_id, j);
    for (const id of doc.gone) queueById.delete(id);
    queueMark = doc.mark;
    queue = [...queueById.values()];
    queueNow = doc.last_update || Date.now() / 1000;
    for (const [id, key] of [["j-user", "user_name"], ["j-account", "account"],
                             ["j-part", "partition"], ["j-state", "state"]]) {
      fillSelect($(id), [...new Set(queue.map((j) => field(j, key)))].filter(Boolean).sort());
    }
    renderQueue();
  } else queueMark = "";
  if (location.hash === "#jobs") viewTimer = setTimeout(loadQueue, POLL_MS);
}

function field(j, key) {
  const st = j.job_state[0];
  if (key === "state") return st;
  if (key === "time") {
    const start = num(j.start_time);
    return st === "PENDING" ? (start || Infinity) : start ? queueNow - start : 0;
  }
  if (key === "where") return st === "PENDING" ? j.state_reason : j.nodes;
  return j[key];
}

function renderQueue() {
  const want = {user_name: $("j-user").value, account: $("j-account").value,
                partition: $("j-part").value, state: $("j-state").value};
  const shown = queue.filter((j) => Object.entries(want).every(([k, v]) => !v || field(j, k) === v));
  shown.sort((a, b) => {
    const x = field(a, sortKey), y = field(b, sortKey);
    const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
    return sortUp ? c : -c;
  });
  const body = $("queue-rows");
  body.textContent = "";
  for (const j of shown.slice(0, queueRows)) {
    const st = j.job_state[0], start = num(j.start_time);
    const time = st === "PENDING"
      ? (start ? "est. start " + fmtTime(start) : "—")
      : `${dur(start ? queueNow - start : null)} / ${limitText(j.time_limit)}`;
    const where = st === "PENDING" ? `(${j.state_reason})` : j.nodes;
    const tr = row([jobLink(j.job_id), j.name, j.user_name, j.account, j.partition, st, time, where]);
    tr.dataset.id = j.job_id;
    tr.dataset.state = st;
    body.appendChild(tr);
  }
  $("j-shown").textContent = `${shown.length} of ${queue.length} jobs`;
  const more = shown.length - Math.min(shown.length, queueRows);
  $("j-more").hidden = more <= 0;
  $("j-more").textContent = `Show ${Math.min(more, QUEUE_PAGE).toLocaleString()} more ` +
    `(${more.toLocaleString()} not shown)`;
  for (const b of document.querySelectorAll("#queue .sort")) {
    b.parentElement.setAttribute("aria-sort", b.dataset.key !== sortKey ? "none"
      : sortUp ? "ascending" : "descending");
  }
}

// -- a job's page -----------------------------------------------------------------------------
async function loadJob(id) {
  clearTimeout(viewTimer);
  const r = await fetch("/ui/job/" + id, {headers: headers({}), cache: "no-store"});
  const doc = await r.json().catch(() => ({}));
  if (!r.ok) {
    $("jd-title").textContent = "Job " + id;
    $("jd-error").textContent = ((doc.errors || [])[0] || {}).error || "HTTP " + r.status;
    $("jd-error").hidden = false;
    for (const x of ["jd-facts", "jd-steps", "jd-script", "jd-actions"]) $(x).textContent = "";
    return;
  }
  renderJob(doc);
  if (location.hash === "#job/" + id) viewTimer = setTimeout(() => loadJob(id), POLL_MS);
}

function renderJob(j) {
  const st = j.job_state[0], start = num(j.start_time), end = num(j.end_time);
  $("jd-title").textContent = `Job ${j.job_id} · ${j.name}`;
  const badge = $("jd-state");
  badge.textContent = st + (j.held ? ` (held by ${j.held})` : "");
  badge.className = "badge " + (st === "RUNNING" ? "s-allocated" : st === "PENDING" ? "s-draining"
                                : st === "COMPLETED" ? "s-idle" : "s-down");
  const gpus = Object.entries(j.gpu_indices).map(([n, ix]) => `${n}: ${ix.join(",")}`).join("; ");
  const exit = `${j.exit_code.return_code.number}:${j.exit_code.signal.id.number || 0}`;
  const facts = [
    ["User", `${j.user_name} (${j.user_id})`], ["Account", j.account || "—"],
    ["Partition", j.partition], ["Reason", j.state_reason],
    ["Nodes", j.nodes || "—"], ["GPUs", gpus || "—"], ["CPUs", num(j.cpus)],
    ["Submitted", fmtTime(num(j.submit_time))],
    [st === "PENDING" ? "Est. start" : "Started", start ? fmtTime(start) : "—"],
    ["Elapsed / limit", `${dur(start && st !== "PENDING" ? (end || j.now) - start : null) || "—"}`
                        + ` / ${limitText(j.time_limit)}`],
    ["Exit code", exit], ["Work dir", j.current_working_directory],
    ["Output", j.batch ? j.stdout_path : "— (an allocation)"],
    ["Error", j.batch ? j.stderr_path : "—"],
  ];
  const dl = $("jd-facts");
  dl.textContent = "";
  for (const [k, v] of facts) dl.append(el("dt", k), el("dd", v === null ? "" : v));
  renderWhy(j.why);
  const steps = $("jd-steps");
  steps.textContent = "";
  for (const s of j.steps) {
    steps.appendChild(row([`${j.job_id}.${s.id}`, s.name, s.state, s.nodes, s.ntasks,
                           `${s.exit_code}:${s.signal || 0}`]));
  }
  if (!j.steps.length) steps.appendChild(row(["none"]));
  $("jd-script").textContent = j.script === null ? "(" + j.script_hidden + ")"
    : j.script || "(an allocation: no batch script)";
  const box = $("jd-actions");
  if (box.dataset.for !== j.actions.join() + j.job_id) {
    box.dataset.for = j.actions.join() + j.job_id;
    box.textContent = "";
    for (const a of j.actions) {
      const b = el("button", a[0].toUpperCase() + a.slice(1), "btn" + (a === "cancel" ? " warn" : ""));
      b.id = "ja-" + a;
      b.onclick = () => jobAction(j.job_id, a, b);
      box.appendChild(b);
    }
    if (!j.actions.length) {
      box.appendChild(el("span", j.signed_in ? `no command applies for ${j.signed_in}`
        : "sign in with a token to act on this job", "muted"));
    }
  }
}

function renderWhy(why) {  // rqueue --why's answer for a pending job (ctld/jobs/why.py)
  $("jd-why").hidden = !why;
  if (!why) return;
  $("jd-why-text").textContent = why.binding;
  const ul = $("jd-why-list");
  ul.textContent = "";
  for (const e of why.evidence) ul.append(el("li", e));
  ul.append(el("li", why.start ? `Estimated start ${fmtTime(why.start)}`
    + (why.nodes ? ` on ${why.nodes}` : "") + ` (${why.estimate})` : why.estimate, "muted"));
  for (const s of why.suggestions) ul.append(el("li", `Sooner: ${s.option}: ${s.text}`));
}

async function jobAction(id, action, button) {
  if (action === "cancel" && button.dataset.armed !== "1") {  // one more click to confirm
    button.dataset.armed = "1";
    button.textContent = "Confirm cancel";
    return;
  }
  const r = await fetch(`/ui/job/${id}/${action}`, {method: "POST", headers: headers({})});
  const doc = await r.json().catch(() => ({}));
  const err = $("jd-error");
  err.hidden = r.ok;
  if (!r.ok) err.textContent = ((doc.errors || [])[0] || {}).error || "HTTP " + r.status;
  loadJob(id);
}

// -- sign in ----------------------------------------------------------------------------------
$("b-signin").onclick = () => { $("tok-input").value = token(); $("tok-dlg").showModal(); };
$("tok-cancel").onclick = () => $("tok-dlg").close();
$("tok-form").addEventListener("submit", () => {
  sessionStorage.setItem("ranch-token", $("tok-input").value.trim());
  etag = null;
  queueMark = "";  // another reader may see other jobs: the whole queue again
  poll();
  route();
});
for (const b of document.querySelectorAll("#queue .sort")) {
  b.onclick = () => {
    sortUp = sortKey === b.dataset.key ? !sortUp : true;
    sortKey = b.dataset.key;
    renderQueue();
  };
}
const firstPage = () => { queueRows = QUEUE_PAGE; renderQueue(); };
for (const id of ["j-user", "j-account", "j-part", "j-state"]) $(id).addEventListener("change", firstPage);
$("j-more").onclick = () => { queueRows += QUEUE_PAGE; renderQueue(); };
window.addEventListener("hashchange", route);
route();
