// Ranch web page, part three: the History tab (/ui/history: racct's records of finished jobs),
// the event timeline (/ui/events: rcontrol events), the admin's reboot and reservation dialogs,
// and the change stream (/ui/stream, Server-Sent Events read through fetch so the token goes
// with it) that patches the nodes an event names instead of refetching the grid.
// Uses app.js's globals ($, headers, token, feed, poll, render, setLive, stateClass, fmtTime);
// jobs.js's helpers (el, row, dur, jobLink) are called only after every script has loaded.
"use strict";
let me = {name: null, admin: false, events: true};
let streamAbort = null, lastSeq = null, eventsTimer = null, restarting = false, changes = 0;
let eventsAsked = 0, historyAsked = 0;  // only the latest answer is drawn (filters change fast)
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
const epochOf = (input) => (input.value ? new Date(input.value).getTime() / 1000 : null);
const firstError = (doc, r) => ((doc.errors || [])[0] || {}).error || "HTTP " + r.status;

async function loadMe() {
  const r = await fetch("/ui/me", {headers: headers({}), cache: "no-store"});
  if (r.ok) me = await r.json();
}

// -- history ----------------------------------------------------------------------------------
const FINAL = ["BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
               "OUT_OF_MEMORY", "PREEMPTED", "SPECIAL_EXIT", "TIMEOUT"];

async function loadHistory() {
  const q = new URLSearchParams();
  for (const [k, id] of [["user", "h-user"], ["account", "h-account"], ["state", "h-state"]]) {
    if ($(id).value.trim()) q.set(k, $(id).value.trim());
  }
  const start = epochOf($("h-start")), end = epochOf($("h-end"));
  if (start !== null) q.set("start", start);
  if (end !== null) q.set("end", end);
  $("h-shown").textContent = "searching…";
  const asked = ++historyAsked;
  const r = await fetch("/ui/history?" + q, {headers: headers({}), cache: "no-store"});
  const doc = await r.json().catch(() => ({}));
  if (asked !== historyAsked) return;
  const note = $("h-note"), body = $("history-rows");
  body.textContent = "";
  if (!r.ok) {
    note.textContent = firstError(doc, r);
    note.hidden = false;
    $("h-shown").textContent = "";
    return;
  }
  const notes = [doc.hidden, doc.history_error].filter(Boolean);
  note.textContent = notes.join(" · ");
  note.hidden = !notes.length;
  for (const j of doc.jobs) {
    const id = j.array_task_id !== null && j.array_task_id !== undefined
      ? `${j.array_job_id}_${j.array_task_id}` : String(j.job_id);
    const exit = `${j.exit_code || 0}:${j.signal || 0}`;
    const ran = j.start_time && j.end_time ? dur(j.end_time - j.start_time) : "—";
    const tr = row([id, j.name, j.user, j.account || "", j.partition, j.state, exit,
                    j.start_time ? fmtTime(j.start_time) : "—", fmtTime(j.end_time), ran,
                    j.nodes || "None assigned"]);
    tr.dataset.id = id;
    tr.dataset.state = j.state;
    tr.dataset.user = j.user;
    body.appendChild(tr);
  }
  if (!doc.jobs.length) {
    const tr = row(["no finished job matches"]);
    tr.firstChild.colSpan = 11;
    body.appendChild(tr);
  }
  $("h-shown").textContent = `${doc.jobs.length.toLocaleString()} jobs` +
    (doc.left_out ? ` (${doc.left_out.toLocaleString()} more: narrow the search)` : "");
  fillList($("h-users"), doc.users);
  fillList($("h-accounts"), doc.accounts);
}

function fillList(list, values) {
  list.textContent = "";
  for (const v of values.filter(Boolean)) list.appendChild(new Option(v, v));
}

// -- the event timeline -----------------------------------------------------------------------
function describe(e) {
  if (e.kind === "state") {
    let t = `${e.old} → ${e.new}`;
    if (e.reason) t += ` · “${e.reason}”`;
    return t;
  }
  if (e.kind.startsWith("guard_")) return `${e.guard} ${e.kind.slice(6)}` + (e.detail ? ` · ${e.detail}` : "");
  if (e.kind === "reservation") return `reservation ${e.name} ${e.action}`;
  if (e.kind.startsWith("controller_")) return e.kind.replace("_", " ") + (e.seconds ? ` (${e.seconds} s)` : "");
  if (e.kind === "start" || e.kind === "reserve") {  // a scheduling decision, with its inputs
    return `job ${e.job} ${e.kind === "start" ? "started by " + e.scheduler : "reserved"}`
      + ` on ${e.nodes}` + ((e.ahead || []).length ? ` · passed ${e.ahead.map(a => a.job).join(",")}` : "");
  }
  return e.kind.replace("_", " ") + (e.peer ? ` from ${e.peer}` : "") + (e.reason ? ` · ${e.reason}` : "");
}

async function loadEvents() {
  clearTimeout(eventsTimer);
  const q = new URLSearchParams();
  if ($("e-node").value.trim()) q.set("node", $("e-node").value.trim());
  if ($("e-kind").value) q.set("kind", $("e-kind").value);
  const back = Number($("e-since").value);
  if (back) q.set("since", Date.now() / 1000 - back);
  const asked = ++eventsAsked;
  const r = await fetch("/ui/events?" + q, {headers: headers({}), cache: "no-store"});
  const doc = await r.json().catch(() => ({}));
  if (asked !== eventsAsked) return;
  const list = $("timeline"), note = $("e-note");
  if (!r.ok) {
    list.textContent = "";
    note.textContent = firstError(doc, r);
    note.hidden = false;
    return;
  }
  note.hidden = true;
  const kinds = $("e-kind");
  if (kinds.length === 1) for (const k of doc.kinds) kinds.add(new Option(k, k));
  list.textContent = "";
  for (const e of doc.events) {
    const li = el("li", null, "ev k-" + e.category);
    li.dataset.kind = e.category;
    li.dataset.node = e.node;
    const when = el("time", new Date(e.time * 1000).toLocaleString());
    when.dateTime = new Date(e.time * 1000).toISOString();
    li.append(when, el("span", e.category, "kind"), el("b", e.node === "-" ? "cluster" : e.node),
              el("span", describe(e), "what"));
    if (e.user) li.append(el("span", "by " + e.user, "muted"));
    list.appendChild(li);
  }
  if (!doc.events.length) list.appendChild(el("li", "no event matches", "muted"));
  $("e-shown").textContent = `${doc.events.length} events`;
  if (!streamLive && location.hash === "#events") eventsTimer = setTimeout(loadEvents, POLL_MS);
}

// -- admin: reboot a node, create and delete reservations -------------------------------------
function openReboot() {
  const name = feed.nodes.name[selected];
  $("rb-title").textContent = "Reboot " + name;
  $("rb-dlg").dataset.node = name;
  for (const id of ["rb-reason", "rb-next"]) $(id).value = "";
  $("rb-asap").checked = false;
  $("rb-error").hidden = true;
  $("rb-dlg").showModal();
}

async function submitReboot(ev) {
  ev.preventDefault();
  const name = $("rb-dlg").dataset.node;
  const body = {asap: $("rb-asap").checked, reason: $("rb-reason").value.trim() || null,
                next_state: $("rb-next").value || null};
  const r = await fetch(`/ui/node/${encodeURIComponent(name)}/reboot`, {
    method: "POST", headers: headers({"Content-Type": "application/json"}),
    body: JSON.stringify(body)});
  const doc = await r.json().catch(() => ({}));
  if (!r.ok) {
    $("rb-error").textContent = firstError(doc, r);
    $("rb-error").hidden = false;
    return;
  }
  $("rb-dlg").close();
  loadNodeDetail(name);  // its buttons now (the stream brings its new state)
  if (!streamLive) { etag = null; poll(); }
}

// Reservations whose Delete was clicked once: the table is redrawn on every poll, and a redraw
// between the two clicks must not disarm the confirmation the admin was asked for.
const armedResv = new Set();

function resvActions(x) {
  const td = document.createElement("td");
  if (!me.admin) return td;
  const armed = armedResv.has(x.name);
  const b = el("button", armed ? "Confirm delete" : "Delete", "btn small warn");
  b.setAttribute("aria-label", "Delete reservation " + x.name);
  b.onclick = async () => {
    if (!armedResv.has(x.name)) { armedResv.add(x.name); b.textContent = "Confirm delete"; return; }
    armedResv.delete(x.name);
    const r = await fetch(`/ui/reservations/${encodeURIComponent(x.name)}/delete`,
                          {method: "POST", headers: headers({})});
    const doc = await r.json().catch(() => ({}));
    if (!r.ok) showNotice(firstError(doc, r));
    pollReservations();
  };
  td.appendChild(b);
  return td;
}

function openReservation() {
  for (const id of ["rs-name", "rs-nodes", "rs-duration", "rs-flags"]) $(id).value = "";
  $("rs-users").value = me.name || "";
  $("rs-start").value = "";
  $("rs-error").hidden = true;
  $("rs-dlg").showModal();
}

async function submitReservation(ev) {
  ev.preventDefault();
  const body = {name: $("rs-name").value.trim(), nodes: $("rs-nodes").value.trim(),
                start: epochOf($("rs-start")) || "now", duration: $("rs-duration").value.trim(),
                users: $("rs-users").value, flags: $("rs-flags").value};
  const r = await fetch("/ui/reservations", {
    method: "POST", headers: headers({"Content-Type": "application/json"}),
    body: JSON.stringify(body)});
  const doc = await r.json().catch(() => ({}));
  if (!r.ok) {
    $("rs-error").textContent = firstError(doc, r);
    $("rs-error").hidden = false;
    return;
  }
  $("rs-dlg").close();
  pollReservations();
}

// -- the change stream ------------------------------------------------------------------------
let nameIndex = null, indexFor = null;

function indexOf(name) {
  if (indexFor !== feed) {
    nameIndex = new Map(feed.nodes.name.map((n, i) => [n, i]));
    indexFor = feed;
  }
  return nameIndex.get(name);
}

function slot(list, value) {  // the index of value in one of the feed's tables, added if new
  const key = JSON.stringify(value);
  let i = list.findIndex((x) => JSON.stringify(x) === key);
  if (i < 0) { list.push(value); i = list.length - 1; }
  return i;
}

function applyChange(doc) {
  if (!feed) return;
  const touched = [];
  for (const [name, r] of Object.entries(doc.nodes)) {
    const i = indexOf(name);
    if (i === undefined) continue;
    const n = feed.nodes;
    n.state[i] = slot(feed.states, r.long);
    n.reason[i] = r.reason ? slot(feed.reasons, r.reason) : -1;
    n.health[i] = r.health ? slot(feed.notes, r.health) : 0;
    n.cpus[i] = r.cpus;
    touched.push(i);
  }
  if (touched.length) {  // only those cells are painted again; the header is recounted
    feed.generated_at = Date.now() / 1000;
    const classes = feed.states.map(stateClass), tiles = $("grid").classList.contains("tiles");
    for (const i of touched) paintCell(i, classes, tiles);
    summarise(classes);
    if ($("f-state").value || $("f-part").value || $("f-name").value) applyFilters();
    if (touched.includes(selected)) showPanel(selected, false);
    setLive(true);
  }
  if (doc.jobs) pollJobs();
  if (doc.reservations) pollReservations();
  if (doc.events && doc.events.length && location.hash === "#events") loadEvents();
}

function onFrame(block) {
  let event = "message", data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event: ")) event = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
    else if (line.startsWith("id: ")) lastSeq = line.slice(4);
  }
  if (!data) return;
  const doc = JSON.parse(data);
  if (event === "hello") {
    streamLive = true;
    clearTimeout(timer);
    timer = setTimeout(poll, FULL_MS);
  } else if (event === "change") {
    changes++;
    applyChange(doc);
  } else if (event === "resync") {
    etag = null;
    poll();
  }
}

async function follow() {
  for (;;) {
    streamAbort = new AbortController();
    try {
      const r = await fetch("/ui/stream", {headers: headers({}), cache: "no-store",
                                           signal: streamAbort.signal});
      if (r.ok) {
        const reader = r.body.getReader(), dec = new TextDecoder();
        let buf = "";
        for (;;) {
          const {value, done} = await reader.read();
          if (done) break;
          buf += dec.decode(value, {stream: true});
          let at;
          while ((at = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, at);
            buf = buf.slice(at + 2);
            try { onFrame(block); } catch (e) { console.error("stream frame", e); }  // keep reading
          }
        }
      }
    } catch (e) { /* gone, or aborted to sign in anew */ }
    if (restarting) {  // a new token: the sign-in refetches everything itself
      restarting = false;
      continue;
    }
    if (streamLive) { streamLive = false; etag = null; poll(); }  // what the gap missed
    await sleep(3000);
  }
}

function restartStream() {
  loadMe().then(pollReservations);
  streamLive = false;
  restarting = true;
  if (streamAbort) streamAbort.abort();
}

$("b-reboot").onclick = openReboot;
$("rb-cancel").onclick = () => $("rb-dlg").close();
$("rb-form").addEventListener("submit", submitReboot);
$("b-resv-new").onclick = openReservation;
$("rs-cancel").onclick = () => $("rs-dlg").close();
$("rs-form").addEventListener("submit", submitReservation);
$("h-form").addEventListener("submit", (ev) => { ev.preventDefault(); loadHistory(); });
$("e-form").addEventListener("submit", (ev) => { ev.preventDefault(); loadEvents(); });
for (const id of ["e-kind", "e-since"]) $(id).addEventListener("change", loadEvents);
$("e-node").addEventListener("change", loadEvents);
// after jobs.js's own listener has kept the new token (it is registered later)
$("tok-form").addEventListener("submit", () => setTimeout(restartStream, 0));
for (const s of FINAL) $("h-state").add(new Option(s, s));
$("h-start").value = new Date(Date.now() - 86400000 - new Date().getTimezoneOffset() * 60000)
  .toISOString().slice(0, 16);
loadMe().then(pollReservations);
follow();
