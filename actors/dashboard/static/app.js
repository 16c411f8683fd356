// actors dashboard: one page, four views (#/ runs, #/run/ID, #/room/ID, #/sessions).
// Every run-written text reaches the DOM as a text node (el() below, textContent):
// nothing here assigns innerHTML. Updates come from /events (server-sent events);
// the page never polls.
"use strict";

const ACTIVE = new Set(["starting", "running"]);
const view = document.getElementById("view");
let state = { route: null, dirty: false, busy: false, page: 1 };

function el(tag, attrs, ...kids) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "on") for (const [ev, fn] of Object.entries(v)) node.addEventListener(ev, fn);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return node;
}

// replaceChildren without the nulls an optional section leaves (it would print "null")
function show(...kids) { view.replaceChildren(...kids.flat().filter((k) => k !== null && k !== undefined && k !== false)); }

function age(ts) {
  if (!ts) return "-";
  const s = Math.max(0, (Date.now() - Date.parse(ts)) / 1000);
  for (const [u, n] of [["d", 86400], ["h", 3600], ["m", 60]]) if (s >= n) return Math.floor(s / n) + u;
  return Math.floor(s) + "s";
}

// The status line's ▷▶ as a picture: one outlined triangle per active work unit, one
// filled, the fill stepping across them once a second (SVG animation, no script timer).
const SVG = "http://www.w3.org/2000/svg";
function marks(units) {
  const n = Math.min(units, 12);
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "marks");
  svg.setAttribute("width", String(n * 13 + 2));
  svg.setAttribute("height", "14");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", units + " active");
  for (let i = 0; i < n; i++) {
    const tri = document.createElementNS(SVG, "polygon");
    const x = 1 + i * 13;
    tri.setAttribute("points", `${x},1 ${x + 11},7 ${x},13`);
    tri.setAttribute("fill-opacity", n === 1 ? "1" : "0");
    if (n > 1) {
      const anim = document.createElementNS(SVG, "animate");
      anim.setAttribute("attributeName", "fill-opacity");
      anim.setAttribute("values", Array.from({ length: n }, (_, j) => (j === i ? "1" : "0")).join(";"));
      anim.setAttribute("dur", n + "s");
      anim.setAttribute("calcMode", "discrete");
      anim.setAttribute("repeatCount", "indefinite");
      tri.append(anim);
    }
    svg.append(tri);
  }
  const wrap = el("span", { class: "marks-wrap", "data-units": units }, svg);
  if (units > n) wrap.append(el("span", { class: "muted" }, " +" + (units - n)));
  return wrap;
}

// The status as `actors ls` words it: `failed (3)`, `done (degraded)`.
function badge(status, code, degraded) {
  let word = status === "failed" && code !== null && code !== undefined && code !== 1 ? `failed (${code})` : status;
  if (degraded) word += " (degraded)";
  return el("span", { class: "status s-" + status + (degraded ? " degraded" : ""), "data-degraded": degraded ? "1" : null }, word);
}

// 950 -> "0.9s", 65000 -> "1m 05s", 7500000 -> "2h 05m"
function duration(ms) {
  if (ms === null || ms === undefined || ms < 0) return "-";
  const s = ms / 1000;
  if (s < 60) return (s < 10 ? s.toFixed(1) : Math.floor(s)) + "s";
  const m = Math.floor(s / 60), h = Math.floor(m / 60);
  return h ? `${h}h ${String(m % 60).padStart(2, "0")}m` : `${m}m ${String(Math.floor(s % 60)).padStart(2, "0")}s`;
}

// A finished run's time from its result; a live one's so far, from its creation.
function runTime(run) {
  if (run.duration_ms !== null && run.duration_ms !== undefined) return duration(run.duration_ms);
  if (ACTIVE.has(run.status) && run.created_at) return duration(Date.now() - Date.parse(run.created_at));
  return "-";
}

// The step counters in words, as `actors status` words them (runtime.views.counts).
function stepsText(c) {
  if (c.completed === null || c.completed === undefined) return "";
  const parts = [`${c.completed} done`];
  if (c.failed) parts.push(`${c.failed} failed` + (c.timed_out ? ` (${c.timed_out} timed out)` : ""));
  if (c.cancelled) parts.push(`${c.cancelled} cancelled`);
  let text = parts.join(", ");
  if (c.retries) text += ` · ${c.retries} ${c.retries === 1 ? "retry" : "retries"}`;
  return text;
}

function clock(ts) {
  if (!ts) return "";
  const d = new Date(typeof ts === "number" ? ts : Date.parse(ts));
  return isNaN(d) ? "" : d.toTimeString().slice(0, 8);
}

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Actors-Dashboard": "1" },
    body: JSON.stringify(body),
  };
  const res = await fetch(path, { credentials: "same-origin", ...opts });
  const data = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
  return { ok: res.ok, status: res.status, data };
}

// A dialog whose buttons say what they do ("Keep running" / "Cancel run"), never a bare
// [Cancel] [Confirm] that reads both ways when the action itself is a cancel.
function ask(text, extra, yes, no) {
  const dlg = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-yes").textContent = yes || "Go ahead";
  document.getElementById("confirm-no").textContent = no || "Go back";
  const box = document.getElementById("confirm-extra");
  box.replaceChildren(...(extra ? [extra] : []));
  dlg.showModal();
  return new Promise((resolve) => {
    const done = (yes) => { dlg.close(); resolve(yes); };
    document.getElementById("confirm-yes").onclick = () => done(true);
    document.getElementById("confirm-no").onclick = () => done(false);
    dlg.oncancel = () => resolve(false);
  });
}

function notice(text, bad) {
  const n = el("div", { class: "notice" + (bad ? " bad" : ""), role: "status" }, text);
  view.prepend(n);
}

// An action under the CLI's ownership rules: confirm; if the run is another session's,
// the server says so and a second confirmation sends force (the CLI's --force).
async function act(what, path, body, question, yes, no) {
  if (!(await ask(question, null, yes, no))) return;
  let res = await api(path, { ...body, force: false });
  if (!res.ok && res.data.needs_force) {
    if (!(await ask(`${res.data.error}. ${what} anyway (force)?`, null, yes + " anyway", no))) return;
    res = await api(path, { ...body, force: true });
  }
  if (!res.ok) notice((res.data.error || "failed") + (res.data.hint ? " - " + res.data.hint : ""), true);
  else notice(`${what}: ${res.data.status || res.data.state || "ok"}`);
}

// a run on a host (`run:<host>/<id>`, listed with its host): its own page and actions
function remoteParts(address) { const m = /^run:([^/]+)\/(.+)$/.exec(address || ""); return m ? { host: m[1], id: m[2] } : null; }
function runApi(run) {
  const r = run.host ? remoteParts(run.run) : null;
  return r ? `/api/hosts/${encodeURIComponent(r.host)}/runs/${encodeURIComponent(r.id)}` : `/api/runs/${run.run}`;
}
function runHref(run) { return (run.host ? "#/remote/" : "#/run/") + encodeURIComponent(run.run); }

function stopButtons(run) {
  if (!ACTIVE.has(run.status) && !(run.host && run.status === "placed")) return [];
  return [
    el("button", { class: "cancel", "data-action": "cancel", on: { click: () => act(`Cancel run ${run.run}`, `${runApi(run)}/cancel`, {},
      `Stop run ${run.run}? Its commands get SIGTERM, then SIGKILL after the grace period; it ends cancelled.`, "Cancel run", "Keep running") } }, "cancel"),
    el("button", { class: "kill danger", "data-action": "kill", on: { click: () => act(`Kill run ${run.run}`, `${runApi(run)}/kill`, {},
      `Kill run ${run.run} now? Every process it has gets SIGKILL at once; it ends killed.`, "Kill run", "Keep running") } }, "kill"),
  ];
}

function messageButton(to) {
  return el("button", { "data-action": "message", on: { click: async () => {
    const type = el("input", { id: "msg-type", placeholder: "type, e.g. task.assign", required: true });
    const body = el("textarea", { id: "msg-body", placeholder: "body: JSON, or text" });
    const form = el("div", { class: "msg" }, el("label", {}, "type ", type), el("label", {}, "body ", body));
    if (!(await ask(`Send a message to ${to}`, form, "Send message", "Don't send"))) return;
    let value = body.value;
    try { value = value.trim() ? JSON.parse(value) : null; } catch { /* text as given */ }
    const res = await api("/api/message", { to, type: type.value, body: value, force: false });
    let final = res;
    if (!res.ok && res.data.needs_force && (await ask(`${res.data.error}. Send anyway (force)?`, null, "Send anyway", "Don't send"))) {
      final = await api("/api/message", { to, type: type.value, body: value, force: true });
    }
    if (!final.ok) notice((final.data.error || "failed") + (final.data.hint ? " - " + final.data.hint : ""), true);
    else notice(`message ${final.data.id}: ${final.data.state}`);
  } } }, "message");
}

// ---- runs -------------------------------------------------------------------------------
function filters() {
  const p = new URLSearchParams(location.hash.split("?")[1] || "");
  return { status: p.get("status") || "", session: p.get("session") || "", q: p.get("q") || "", page: Number(p.get("page") || 1), per: p.get("per") || "" };
}

function setFilters(f) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(f)) if (v && !(k === "page" && v === 1)) p.set(k, v);
  location.hash = "#/" + (p.toString() ? "?" + p : "");
}

function runRow(run, depth) {
  const rows = [el("tr", { "data-run": run.run, "data-status": run.status, class: "depth-" + Math.min(depth, 6) },
    el("td", { class: "run" }, el("span", { class: "indent" }, depth ? "└ ".padStart(depth * 2 + 2, " ") : ""),
      el("a", { href: runHref(run) }, run.run)),
    el("td", {}, badge(run.status, run.code, run.degraded)),
    el("td", { class: "age", title: run.created_at || "" }, age(run.created_at)),
    el("td", { class: "duration" }, runTime(run)),
    el("td", { class: "what" }, run.what),
    el("td", { class: "progress" }, run.units ? marks(run.units) : "", " ", stepsText(run)),
    el("td", { class: "host" }, run.host || ""),
    el("td", { class: "actions" }, stopButtons(run)))];
  for (const [label, st] of Object.entries(run.branches || {})) {
    rows.push(el("tr", { class: "branch", "data-branch": label },
      el("td", { colspan: 8 }, el("span", { class: "indent" }, " ".repeat(depth * 2 + 4)), `branch ${label}: `, el("span", { class: "status s-" + st }, st))));
  }
  for (const kid of run.children) rows.push(...runRow(kid, depth + 1));
  return rows;
}

async function showRuns() {
  const f = filters();
  const q = new URLSearchParams({ status: f.status, session: f.session, q: f.q, page: f.page, per: f.per });
  const res = await api("/api/runs?" + q);
  if (!res.ok) return show(el("p", { class: "bad" }, res.data.error || "error"));
  const d = res.data;
  const statusSel = el("select", { id: "f-status", on: { change: (e) => setFilters({ ...f, status: e.target.value, page: 1 }) } },
    ["", "active", "queued", "running", "done", "failed", "killed", "cancelled", "skipped", "exited", "terminal"].map((s) => el("option", { value: s, selected: s === f.status }, s || "any status")));
  const sessSel = el("select", { id: "f-session", on: { change: (e) => setFilters({ ...f, session: e.target.value, page: 1 }) } },
    el("option", { value: "" }, "any session"), d.sessions.map((s) => el("option", { value: s, selected: s === f.session }, s)));
  const text = el("input", { id: "f-text", type: "search", placeholder: "run, recipe or command", value: f.q,
    on: { change: (e) => setFilters({ ...f, q: e.target.value, page: 1 }) } });
  const head = el("div", { class: "bar" }, statusSel, sessSel, text,
    el("span", { class: "muted", id: "counts" }, `${d.matched} runs`, ...Object.entries(d.counts).map(([k, v]) => ` · ${v} ${k}`)));
  const groups = d.groups.map((g) => el("section", { class: "group", "data-session": g.session },
    el("h2", {}, "session ", el("code", {}, g.session), " ", g.units ? marks(g.units) : ""),
    el("table", { class: "runs" },
      el("thead", {}, el("tr", {}, ["run", "status", "age", "duration", "recipe", "steps", "host", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, g.runs.flatMap((r) => runRow(r, 0))))));
  const pager = el("div", { class: "bar pager" },
    el("button", { id: "prev", disabled: d.page <= 1, on: { click: () => setFilters({ ...f, page: d.page - 1 }) } }, "newer"),
    el("span", { id: "page" }, `page ${d.page} of ${d.pages}`),
    el("button", { id: "next", disabled: d.page >= d.pages, on: { click: () => setFilters({ ...f, page: d.page + 1 }) } }, "older"));
  show(head, ...(groups.length ? groups : [el("p", { class: "muted", id: "empty" }, "no runs")]), pager);
  document.getElementById("me").replaceChildren("acting as ", el("code", {}, d.me), " ", d.my_units ? marks(d.my_units) : "");
  view.dataset.painted = String(d.version);
  // for bench/bench_dashboard.py: when the first table reached the screen
  if (!performance.getEntriesByName("runs-painted").length) requestAnimationFrame(() => performance.mark("runs-painted"));
}

// ---- one run ------------------------------------------------------------------------------
function section(title, ...body) { return el("section", { class: "box", "data-box": title }, el("h3", {}, title), ...body); }
function pre(lines, cls) { return el("pre", { class: cls }, (lines || []).join("\n")); }
function kv(obj) {
  // an absent value is left out, never shown as "undefined" or "null"
  const rows = Object.entries(obj || {}).filter(([, v]) => v !== null && v !== undefined && v !== "");
  if (!rows.length) return el("p", { class: "muted" }, "none");
  return el("table", { class: "kv" }, rows.map(([k, v]) =>
    el("tr", { "data-key": k }, el("th", {}, k), el("td", {}, typeof v === "object" ? JSON.stringify(v) : String(v)))));
}

function failure(result) {
  const f = result && result.failure;
  if (!f || !f.command) return null;
  return el("div", { class: "failure" },
    el("div", {}, "command ", el("code", {}, f.command), f.label ? ` (${f.label})` : ""),
    el("div", {}, "exit ", String(f.exit_code ?? f.code)),
    f.stderr_tail ? el("div", {}, "stderr" + (f.stderr_cut ? " (last lines)" : "") + ":", el("pre", { class: "stderr" }, f.stderr_tail)) : null);
}

// Every failed node, with its policy: what made a run failed, or degraded though done.
function failures(result) {
  const rows = (result && result.failures) || [];
  if (!rows.length) return null;
  return el("table", { class: "failures" },
    el("tr", {}, ["node", "status", "code", "policy", "reason"].map((h) => el("th", {}, h))),
    rows.map((f) => el("tr", { "data-node": f.node || "" }, el("td", {}, f.label || f.node || ""), el("td", {}, badge(f.status)),
      el("td", {}, String(f.code ?? "")), el("td", {}, f.policy || ""), el("td", {}, f.reason || ""))));
}

// The run's commands as its steps ran them, oldest first: a retry says so, a recover too.
// "log" folds out the command's own output (its captures), as a GitHub Actions step does.
const openLogs = { run: null, ids: new Set() };

function stepsTable(steps, logs) {
  if (!steps || !steps.length) return el("p", { class: "muted" }, "no command has started");
  const toggle = (id) => { if (!openLogs.ids.delete(id)) openLogs.ids.add(id); render(); };
  return el("table", { class: "steps" },
    el("tr", {}, ["started", "step", "attempt", "status", "exit", "duration", "command", ""].map((h) => el("th", {}, h))),
    steps.flatMap((c) => [el("tr", { "data-command": c.command_id, "data-status": c.status },
      el("td", { class: "muted", title: c.started_at || "" }, clock(c.started_at)),
      el("td", {}, c.label || c.node || ""),
      el("td", { class: "attempt" }, c.recover ? el("span", { class: "tag" }, "recover") :
        c.attempt > 1 ? el("span", { class: "tag retry" }, `retry ${c.attempt - 1} (attempt ${c.attempt})`) : String(c.attempt ?? "")),
      el("td", {}, badge(c.status)),
      el("td", {}, c.code === null || c.code === undefined ? "" : String(c.code)),
      el("td", {}, c.duration_ms === null || c.duration_ms === undefined ? (c.status === "running" ? duration(Date.now() - Date.parse(c.started_at)) : "") : duration(c.duration_ms)),
      el("td", {}, el("code", {}, c.command || "")),
      el("td", {}, el("button", { "data-action": "log", "aria-expanded": openLogs.ids.has(c.command_id) ? "true" : "false",
        on: { click: () => toggle(c.command_id) } }, openLogs.ids.has(c.command_id) ? "hide log" : "log"))),
      logs[c.command_id] ? el("tr", { class: "step-log", "data-log": c.command_id }, el("td", { colspan: 8 },
        logs[c.command_id].error ? el("p", { class: "bad" }, logs[c.command_id].error) :
          [pre(logs[c.command_id].stdout, "stdout"), logs[c.command_id].stderr.length ? pre(logs[c.command_id].stderr, "stderr") : null,
           !logs[c.command_id].stdout.length && !logs[c.command_id].stderr.length ? el("p", { class: "muted" }, "no output") : null])) : null]));
}

async function stepLogs(run) {
  if (openLogs.run !== run) Object.assign(openLogs, { run, ids: new Set() });
  const logs = {};
  await Promise.all([...openLogs.ids].map(async (id) => {
    const res = await api(`/api/runs/${encodeURIComponent(run)}/commands/${encodeURIComponent(id)}`);
    logs[id] = res.ok ? res.data : { error: res.data.error || "error" };
  }));
  return logs;
}

// The live tail: it follows the end (unless the reader scrolled up to read), each line
// stamped with when this page first saw it (the lines already there when the page
// opened: with the log's last write, "≤"), and a search that keeps only matching lines.
const tail = { run: null, seen: new Map(), follow: true, query: "", focused: false, scrollTop: 0, first: true };

function tailBox(d, id) {
  if (tail.run !== id) Object.assign(tail, { run: id, seen: new Map(), follow: true, query: "", scrollTop: 0, first: true });
  const now = Date.now(), counts = new Map();
  const lines = d.stdout.map((text) => {
    const n = (counts.get(text) || 0) + 1; counts.set(text, n);
    const key = n + "\u0000" + text; // the nth line with this text keeps its stamp
    if (!tail.seen.has(key)) tail.seen.set(key, tail.first ? { ts: d.tail_updated_at, upto: true } : { ts: now, upto: false });
    const seen = tail.seen.get(key);
    return el("div", { class: "line" },
      el("span", { class: "ts" + (seen.upto ? " upto" : ""), title: seen.upto ? "written at or before" : "seen at" }, (seen.upto ? "≤" : "") + clock(seen.ts)),
      el("span", { class: "text" }, text));
  });
  tail.first = false;
  const keys = new Set(Array.from(counts, ([text, n]) => Array.from({ length: n }, (_, i) => (i + 1) + "\u0000" + text)).flat());
  for (const key of tail.seen.keys()) if (!keys.has(key)) tail.seen.delete(key); // lines gone from the tail
  const box = el("div", { class: "tail", id: "tail", tabindex: "0" }, lines);
  const count = el("span", { class: "muted", id: "tail-count" });
  const search = el("input", { id: "tail-search", type: "search", placeholder: "search the output", value: tail.query,
    on: { input: (e) => { tail.query = e.target.value; filterTail(box, count); },
          focus: () => { tail.focused = true; }, blur: () => { tail.focused = false; } } });
  const follow = el("input", { id: "tail-follow", type: "checkbox", checked: tail.follow,
    on: { change: (e) => { tail.follow = e.target.checked; if (tail.follow) box.scrollTop = box.scrollHeight; } } });
  box.addEventListener("scroll", () => {
    tail.scrollTop = box.scrollTop;
    const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
    if (atEnd !== tail.follow) { tail.follow = atEnd; follow.checked = atEnd; }
  });
  filterTail(box, count);
  const after = () => {
    box.scrollTop = tail.follow ? box.scrollHeight : tail.scrollTop || 0; // a reader keeps their place
    if (tail.focused) { search.focus(); search.setSelectionRange(search.value.length, search.value.length); }
  };
  return { node: el("div", {}, el("div", { class: "bar" }, search, el("label", {}, follow, " follow the end"), count), box), after };
}

function filterTail(box, count) {
  const q = tail.query.toLowerCase();
  let shown = 0;
  for (const line of box.children) {
    const hit = !q || line.lastChild.textContent.toLowerCase().includes(q);
    line.hidden = !hit;
    if (hit) shown++;
  }
  count.textContent = q ? `${shown} of ${box.children.length} lines` : `${box.children.length} lines`;
}

async function showRun(id) {
  const res = await api("/api/runs/" + encodeURIComponent(id));
  if (!res.ok) return show(el("p", { class: "bad" }, res.data.error || "error"));
  const d = res.data, s = d.status, r = d.result;
  const what = s.recipe || s.tool || s.command || "-";
  const took = r && r.duration_ms !== undefined ? r.duration_ms : ACTIVE.has(s.status) && s.created_at ? Date.now() - Date.parse(s.created_at) : null;
  const live = tailBox(d, s.run);
  const logs = await stepLogs(s.run);
  show(
    el("h2", {}, "run ", el("code", { id: "run-id" }, s.run), " ", el("span", { id: "run-status" }, badge(s.status, s.code, s.degraded)),
      s.active ? marks(s.active) : ""),
    el("p", { class: "muted", id: "run-facts" }, `${what} · owner ${s.owner_id || "-"} · started ${age(s.created_at)} ago`,
      el("span", { id: "run-duration" }, ` · ${ACTIVE.has(s.status) ? "running for" : "took"} ${duration(took)}`),
      el("span", { id: "run-steps" }, stepsText(s) ? ` · ${stepsText(s)}` : ""),
      s.reason && !r ? ` · ${s.reason}` : ""),
    d.result_line ? el("p", { class: "result-line", id: "result-line" }, el("span", { class: "muted" }, "result "), el("code", {}, d.result_line)) : null,
    el("div", { class: "bar" }, stopButtons(s), ACTIVE.has(s.status) ? messageButton("run:" + s.run) : null,
      d.has_room ? el("a", { href: "#/room/" + encodeURIComponent(s.run), id: "room-link" }, "room") : null),
    r || d.result_problem ? section("result", d.result_problem ? el("p", { class: "bad" }, d.result_problem) : null,
      r ? kv({ status: r.status + (r.degraded ? " (degraded)" : ""), code: r.code, reason: r.reason,
        started: r.started_at, ended: r.ended_at, duration: r.duration_ms === undefined ? null : duration(r.duration_ms),
        steps: stepsText(r) || null, attempts: r.attempts }) : null,
      failure(r), failures(r), r && r.output ? pre([r.output], "output") : null) : null,
    section("steps", stepsTable(d.steps, logs)),
    section("output (live tail)", live.node, d.stderr.length ? el("div", {}, el("h3", {}, "stderr"), pre(d.stderr, "stderr")) : null),
    section("events", el("table", { class: "events" }, d.events.map((e) =>
      el("tr", {}, el("td", { class: "muted" }, e.ts || ""), el("td", {}, e.event || ""),
        el("td", {}, Object.entries(e).filter(([k]) => !["ts", "event", "id", "run_instance_id"].includes(k))
          .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join(" ")))))),
    section("messages in", msgTable(d.inbox, ["state", "type", "from", "summary", "ts"])),
    section("messages out", msgTable(d.outbox, ["ts", "type", "to", "summary", "level"])),
    section("artifacts", kv(d.artifacts)),
    d.children.length ? section("children", el("ul", {}, d.children.map((c) =>
      el("li", {}, el("a", { href: "#/run/" + encodeURIComponent(c.run) }, c.run), " ", badge(c.status, c.code, c.degraded), " ", c.recipe || c.tool || c.command || "")))) : null,
    section("values", kv(d.values)));
  live.after();
  for (const p of view.querySelectorAll("pre.stderr")) p.scrollTop = p.scrollHeight;
}

// ---- a run on a host ------------------------------------------------------------------------
async function showRemote(address) {
  const r = remoteParts(address);
  if (!r) return show(el("p", { class: "bad" }, "not a remote run's address"));
  const res = await api(`/api/hosts/${encodeURIComponent(r.host)}/runs/${encodeURIComponent(r.id)}`);
  if (!res.ok) return show(el("p", { class: "bad" }, (res.data.error || "error") + (res.data.hint ? " - " + res.data.hint : "")));
  const d = res.data, s = d.status, out = d.result;
  const run = { run: d.address, host: d.host, status: s.status };
  show(
    el("h2", {}, "run ", el("code", { id: "run-id" }, d.address), " ", el("span", { id: "run-status" }, badge(s.status, s.code, s.degraded))),
    el("p", { class: "muted", id: "run-facts" }, `on host ${d.host} · ${s.recipe || s.command || "-"} · started ${age(s.created_at)} ago`),
    el("div", { class: "bar" }, stopButtons(run), ACTIVE.has(s.status) ? messageButton(d.address) : null),
    out ? section("result", kv({ status: out.status, code: out.code, reason: out.reason, started: out.started_at, ended: out.ended_at }),
      out.output ? pre([out.output], "output") : null) : null,
    section("status (as the host answers it)", kv(Object.fromEntries(Object.entries(s).filter(([, v]) => typeof v !== "object")))));
}

function msgTable(rows, keys) {
  if (!rows || !rows.length) return el("p", { class: "muted" }, "none");
  return el("table", {}, el("tr", {}, keys.map((k) => el("th", {}, k))),
    rows.map((r) => el("tr", {}, keys.map((k) => el("td", {}, r[k] === null || r[k] === undefined ? "" : String(r[k]))))));
}

// ---- a swarm's room -------------------------------------------------------------------------
async function showRoom(id) {
  const res = await api("/api/rooms/" + encodeURIComponent(id));
  if (!res.ok) return show(el("p", { class: "bad" }, res.data.error || "error"));
  const d = res.data;
  show(
    el("h2", {}, "room ", el("code", {}, "room:" + d.run), " ", badge(d.status.status, d.status.code)),
    el("p", {}, el("a", { href: "#/run/" + encodeURIComponent(d.run) }, "the run"), ` · ${d.messages} messages`),
    el("div", { class: "bar" }, messageButton("room:" + d.run)),
    section("workers", el("table", { class: "workers" },
      el("tr", {}, ["worker", "claims", "done", "failed", "backlog left", "state"].map((h) => el("th", {}, h))),
      d.workers.map((w) => el("tr", { "data-worker": w.sender }, el("td", {}, el("code", {}, w.sender)), el("td", {}, String(w.claims.length)),
        el("td", {}, String(w.done)), el("td", {}, String(w.failed)), el("td", {}, w.backlog_left ?? "-"),
        el("td", {}, w.idle ? "idle" : w.last_type || ""))))),
    d.drained ? el("p", { class: "drained" }, d.drained.summary || "drained") : null,
    // the same per-task table as `actors result RUN` (runtime/views/swarm_tasks.py)
    section("tasks", el("table", { class: "tasks" },
      el("tr", {}, ["#", "worker", "item", "state", "commit", "reason"].map((h) => el("th", {}, h))),
      d.tasks.map((t) => el("tr", { "data-claim": t.item || "", "data-state": t.state, "data-task": t.task ?? "" },
        el("td", {}, t.task ?? "-"), el("td", {}, t.worker), el("td", {}, t.item || ""),
        el("td", {}, el("span", { class: "status s-" + t.state }, t.state)), el("td", {}, el("code", {}, (t.commit || "").slice(0, 12))),
        el("td", {}, t.reason || ""))))),
    section("timeline", msgTable(d.shown.slice().reverse(), ["ts", "from", "type", "summary"])));
}

// ---- sessions -----------------------------------------------------------------------------
async function showSessions() {
  const res = await api("/api/sessions");
  if (!res.ok) return show(el("p", { class: "bad" }, res.data.error || "error"));
  const stages = ["queued", "triggered", "woke", "injected", "processed"];
  const chips = (seen) => el("span", { class: "stages" }, stages.map((s) => el("span", { class: "chip" + (seen.includes(s) ? " on" : "") }, s)));
  const list = res.data.sessions.map((s) => el("section", { class: "box", "data-session": s.session },
    el("h3", {}, el("code", {}, s.session), ` · ${s.harness}`, s.registered ? "" : " (unregistered)"),
    el("p", {}, "level declared ", el("strong", { class: "declared" }, s.declared_level), " · observed ",
      el("strong", { class: "observed" }, s.observed_level || "none yet"), " ", chips(s.observed)),
    el("table", { class: "deliveries" }, el("tr", {}, ["run", "follow-up", "state", "attempts", "observed", "at"].map((h) => el("th", {}, h))),
      s.deliveries.map((r) => el("tr", { "data-delivery": r.id, title: "delivery " + r.id },
        el("td", { class: "run" }, r.run ? el("a", { href: "#/run/" + encodeURIComponent(r.run) }, r.run) : el("span", { class: "muted" }, "-")),
        el("td", { class: "followup" }, el("div", {}, el("strong", {}, r.type || ""), r.mode && r.mode !== "immediate" ? ` (${r.mode})` : ""),
          r.summary ? el("div", { class: "summary" }, r.summary) : null),
        el("td", {}, r.state || "", r.receipt && r.receipt !== r.state ? el("div", { class: "muted" }, r.receipt) : null,
          r.reason ? el("div", { class: "muted" }, r.reason) : null),
        el("td", {}, String(r.attempts)), el("td", {}, chips(r.observed)),
        el("td", { class: "muted", title: r.at || "" }, r.at ? `${age(r.at)} ago` : ""))))));
  show(el("h2", {}, "sessions"), ...(list.length ? list : [el("p", { class: "muted" }, "no sessions")]));
}

// ---- routing and live updates ----------------------------------------------------------------
function route() {
  const h = location.hash.replace(/^#/, "").split("?")[0] || "/";
  let m;
  if ((m = h.match(/^\/run\/(.+)$/))) return { name: "run", id: decodeURIComponent(m[1]) };
  if ((m = h.match(/^\/room\/(.+)$/))) return { name: "room", id: decodeURIComponent(m[1]) };
  if ((m = h.match(/^\/remote\/(.+)$/))) return { name: "remote", id: decodeURIComponent(m[1]) };
  if (h === "/sessions") return { name: "sessions" };
  return { name: "runs" };
}

async function render() {
  if (state.busy) { state.dirty = true; return; }
  state.busy = true;
  try {
    const r = (state.route = route());
    for (const a of document.querySelectorAll("[data-nav]")) a.classList.toggle("here", a.dataset.nav === r.name);
    if (r.name === "run") await showRun(r.id);
    else if (r.name === "room") await showRoom(r.id);
    else if (r.name === "remote") await showRemote(r.id);
    else if (r.name === "sessions") await showSessions();
    else await showRuns();
  } finally {
    state.busy = false;
    if (state.dirty) { state.dirty = false; render(); }
  }
}

function onChange(ev) {
  const c = JSON.parse(ev.data), r = state.route || route();
  if (c.reload) return render(); // the server lost events and listed everything again
  const mine = (id) => c.touched.includes(id) || c.changed.includes(id);
  if ((r.name === "runs" && c.changed.length) || ((r.name === "run" || r.name === "room") && mine(r.id)) ||
      (r.name === "sessions" && c.sessions)) render();
}

function connect() {
  const live = document.getElementById("live");
  const es = new EventSource("/events");
  let connected = false;
  es.addEventListener("hello", () => {
    live.textContent = "live"; live.className = "live on";
    if (connected) render(); // reconnected: events may have been missed meanwhile
    connected = true;
  });
  es.addEventListener("change", onChange);
  es.onerror = () => { live.textContent = "offline"; live.className = "live off"; };
}

window.addEventListener("hashchange", render);
document.addEventListener("keydown", (e) => { if (e.key === "Escape") document.getElementById("confirm").close(); });
connect();
render();
