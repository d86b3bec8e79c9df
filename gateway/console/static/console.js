// The gateway console's page: renders /api/v1/... (no framework, no build step). Every
// figure is the API's value as the API gives it (64-bit integers are strings there).
"use strict";

const state = { session: { admin: false, csrf: "", interval: 2 }, sessionReady: null,
                view: "topology",
                channel: null, conflict: null, timer: null };

function el(tag, attrs, ...children) {
  const ns = ["svg", "path", "line", "text", "polyline"].includes(tag)
    ? "http://www.w3.org/2000/svg" : null;
  const e = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "on") { for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn); }
    else if (v !== null && v !== undefined && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

async function api(path, options) {
  const r = await fetch("/api/v1/" + path, options);
  const doc = await r.json();
  if (!r.ok) throw new Error(doc.error || r.statusText);
  return doc;
}

async function act(path, body, question) {
  if (!window.confirm(question)) return;
  try {
    const doc = await api(path, { method: "POST", headers: {
      "Content-Type": "application/json", "X-CSRF-Token": state.session.csrf },
      body: JSON.stringify(Object.assign({ confirm: true }, body)) });
    showError("");
    window.alert(doc.message);
  } catch (e) { showError(e.message); }
  refresh();
}

function showError(msg) {
  const p = document.getElementById("error");
  p.textContent = msg;
  p.hidden = !msg;
}

function secs(v) { return Number(v).toFixed(3); }

function when(ns) {
  if (ns === null || ns === undefined || ns === "" || ns === "0") return "-";
  return new Date(Number(BigInt(ns) / 1000000n)).toISOString();  // as gateway status
}

function cell(field, value, cls) {
  return el("td", { "data-field": field, class: cls || null }, value);
}

function table(head, rows, attrs) {
  return el("table", attrs || {}, el("thead", {}, el("tr", {}, head.map(h => el("th", {}, h)))),
            el("tbody", {}, rows));
}

// ---------------------------------------------------------------- topology

function channelRow(ch, withActions) {
  const rt = ch.replicated_time_ns;
  const row = el("tr", { "data-cluster": ch.cluster_id, "data-channel": ch.name },
    cell("cluster_id", ch.cluster_id), cell("name", ch.name),
    cell("direction", ch.direction),
    cell("state", ch.state, "state-" + ch.state),
    cell("applied_epoch", ch.applied_epoch, "num"),
    cell("source_epoch", ch.source_epoch === undefined ? "-" : ch.source_epoch, "num"),
    cell("lag_epochs", ch.lag_epochs, "num"),
    cell("lag_seconds", secs(ch.lag_seconds), "num"),
    cell("since_last_heard", ch.since_last_heard ? "source silent: estimate" : ""),
    cell("replicated_time", when(rt)),
    cell("transactions_applied", ch.transactions_applied, "num"),
    cell("last_error", ch.last_error || ""));
  if (withActions) {
    const td = el("td", {});
    if (state.session.admin) {
      const action = ch.paused ? "resume" : "pause";
      td.append(el("button", { "data-action": action, on: { click: () => act(
        `channels/${ch.cluster_id}/${encodeURIComponent(ch.name)}/${action}`, {},
        `${action} channel ${ch.name} of cluster ${ch.cluster_id}?`) } }, action));
    }
    row.append(td);
  }
  return row;
}

const CHANNEL_HEAD = ["cluster", "channel", "source -> replica", "state", "applied epoch",
                      "source's newest epoch",
                      "lag epochs", "lag s", "", "replicated time", "transactions applied",
                      "last error"];

function renderTopology(topo) {
  const v = document.getElementById("view-topology");
  const cards = topo.clusters.map(c => el("div", { class: "card", "data-cluster": c.cluster_id },
    el("h3", {}, `cluster ${c.cluster_id}`),
    el("div", {}, "leader ", el("span", { "data-field": "leader_id" }, c.leader_id || "none"),
       " ", el("span", { class: "muted" }, c.leader_api || "")),
    el("div", { class: "muted" }, `epoch ${c.epoch || "-"} · commit ${c.commit_index || "-"}` +
       ` · conflicts role ${c.conflict_role || "-"}`),
    c.error ? el("div", { class: "error" }, c.error) : null,
    table(["node", "role", "api"], c.nodes.map(n => el("tr", { "data-node": n.node_id },
      cell("node_id", n.node_id), cell("role", n.role), cell("api_address", n.api_address)))),
    (c.tables || []).length ? table(["table", "schema version"], c.tables.map(t =>
      el("tr", { "data-table": t.table }, cell("table", t.table),
         cell("version", `${t.version}` + (t.dropped ? " (dropped)" : t.implicit ? " (implicit)" : "")))))
      : null));
  const unreachable = topo.unreachable.map(u => el("div", { class: "error" },
    `unreachable ${u.address}: ${u.error}`));
  v.replaceChildren(el("h2", {}, `Clusters (${topo.clusters.length})`),
    el("div", { class: "cards" }, cards), ...unreachable,
    el("h2", {}, `Channels (${topo.channels.length})`),
    table([...CHANNEL_HEAD, ""], topo.channels.map(ch => channelRow(ch, true)),
          { id: "channels-table" }));
}

// ---------------------------------------------------------------- channel history

function chart(title, points, unit) {
  const W = 640, H = 160, L = 56, B = 22, T = 18;
  const svg = el("svg", { class: "chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`,
                          "data-chart": title });
  svg.append(el("text", { x: L, y: 12 }, title));
  const pts = points.filter(p => p[1] !== null && Number.isFinite(p[1]));
  if (pts.length === 0) { svg.append(el("text", { x: L, y: H / 2 }, "no samples yet")); return svg; }
  const t0 = pts[0][0], t1 = Math.max(pts[pts.length - 1][0], t0 + 1);
  const vmax = Math.max(...pts.map(p => p[1]), 1);
  const x = t => L + (W - L - 8) * (t - t0) / (t1 - t0);
  const y = val => H - B - (H - B - T) * val / vmax;
  svg.append(el("line", { class: "axis", x1: L, y1: H - B, x2: W - 8, y2: H - B }),
             el("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }),
             el("text", { x: 2, y: T + 8 }, `${vmax.toPrecision(3)} ${unit}`),
             el("text", { x: 2, y: H - B }, `0 ${unit}`),
             el("text", { x: L, y: H - 6 }, new Date(t0 * 1000).toISOString().slice(11, 19)),
             el("text", { x: W - 60, y: H - 6 }, new Date(t1 * 1000).toISOString().slice(11, 19)),
             el("polyline", { class: "line",
                              points: pts.map(p => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ") }));
  return svg;
}

async function renderChannels(topo) {
  const v = document.getElementById("view-channels");
  if (!state.channel && topo.channels.length) {
    state.channel = [topo.channels[0].cluster_id, topo.channels[0].name];
  }
  const pick = el("select", { id: "channel-pick", on: { change: e => {
    state.channel = JSON.parse(e.target.value); refresh(); } } },
    topo.channels.map(ch => {
      const val = JSON.stringify([ch.cluster_id, ch.name]);
      return el("option", { value: val, selected: val === JSON.stringify(state.channel) },
                `cluster ${ch.cluster_id}: ${ch.name} (${ch.direction})`);
    }));
  const parts = [el("h2", {}, "Channel history (last hour)"), pick];
  if (state.channel) {
    const [cid, name] = state.channel;
    const ch = topo.channels.find(c => c.cluster_id === cid && c.name === name);
    if (ch) parts.push(table(CHANNEL_HEAD, [channelRow(ch, false)]));
    try {
      const h = await api(`channels/${cid}/${encodeURIComponent(name)}/history`);
      const s = h.samples;
      const behind = s.map(p => [p.t, p.replicated_time_ns === null ? p.lag_seconds
        : Math.max(0, p.t - Number(BigInt(p.replicated_time_ns) / 1000000n) / 1000)]);
      parts.push(el("div", {}, chart("replicated time: seconds behind", behind, "s")),
                 el("div", {}, chart("throughput: transactions applied per second",
                                     s.map(p => [p.t, p.throughput]), "tx/s")),
                 el("p", { class: "muted", "data-field": "samples" },
                    `${s.length} samples, one every ${h.interval} s`));
    } catch (e) { parts.push(el("p", { class: "error" }, e.message)); }
  }
  v.replaceChildren(...parts);
}

// ---------------------------------------------------------------- appliers

function selected(box) {
  return [...box.querySelectorAll("input[type=checkbox]:checked")].map(i => i.value);
}

async function renderAppliers() {
  const doc = await api("appliers");
  const v = document.getElementById("view-appliers");
  const parts = [el("h2", {}, "Appliers (on each cluster's leader)")];
  for (const c of doc.clusters) {
    parts.push(el("h3", {}, `cluster ${c.cluster_id}`), c.error ? el("p", { class: "error" }, c.error) : null,
      table(["applier", "scope", "running", "position", "lag entries", "lag s", "dead letters",
             "schema", "error"], c.appliers.map(a => el("tr", { "data-cluster": c.cluster_id, "data-applier": a.name },
        cell("name", a.name), cell("scope", a.scope), cell("running", a.running ? "yes" : "no"),
        cell("position", a.position, "num"), cell("lag_entries", a.lag_entries, "num"),
        cell("lag_seconds", secs(a.lag_seconds), "num"),
        cell("dead_letters", a.dead_letters, "num"),
        // each table's version as of the applier's position (the node's: the Tables view)
        cell("schema", (a.schema || []).map(t => `${t.table} v${t.version}${t.dropped ? " (dropped)" : ""}`).join(", ")),
        cell("error", a.error || "")))));
    if (c.dead_letters_error) parts.push(el("p", { class: "error" }, c.dead_letters_error));
    if (!c.dead_letters.length) continue;
    const box = el("div", { "data-dead-letters": c.cluster_id },
      el("h3", {}, `open dead letters on node ${c.node_id} (${c.node_api})`),
      table([state.session.admin ? "" : null, "applier", "id", "gtid", "kind", "table", "key",
             "error", "attempts"].filter(h => h !== null),
        c.dead_letters.map(d => el("tr", { "data-cluster": c.cluster_id, "data-letter": d.id },
          state.session.admin ? el("td", {}, el("input", { type: "checkbox", value: d.id,
                                                           "data-applier": d.applier })) : null,
          cell("applier", d.applier), cell("id", d.id), cell("gtid", d.gtid), cell("kind", d.kind),
          cell("table", d.table), cell("key", d.key), cell("error", d.error),
          cell("attempts", d.attempts, "num")))));
    if (state.session.admin) {
      for (const action of ["replay", "discard"]) {
        box.append(el("button", { "data-action": action, on: { click: () => {
          const picked = [...box.querySelectorAll("input[type=checkbox]:checked")];
          const appliers = [...new Set(picked.map(i => i.dataset.applier))];
          if (appliers.length !== 1) { showError("select letters of one applier first"); return; }
          act(`deadletters/${c.cluster_id}/${encodeURIComponent(appliers[0])}/${action}`,
              { ids: picked.map(i => i.value), node: c.node_id },
              `${action} ${picked.length} dead letter(s) of ${appliers[0]} on node ${c.node_id} of cluster ${c.cluster_id}?`);
        } } }, `${action} selected`));
      }
    }
    parts.push(box);
  }
  v.replaceChildren(...parts);
}

// ---------------------------------------------------------------- conflicts

async function renderConflicts() {
  const doc = await api("conflicts");
  const v = document.getElementById("view-conflicts");
  const parts = [el("h2", {}, "Conflicts")];
  for (const c of doc.clusters) {
    parts.push(el("h3", {}, `cluster ${c.cluster_id}`));
    const counters = c.channels.flatMap(ch => Object.entries(ch.counters).map(([k, n]) =>
      el("tr", {}, cell("channel", ch.name), cell("counter", k), cell("value", n, "num"))));
    if (counters.length) parts.push(table(["channel", "counter", "value"], counters));
    const rows = c.tables.flatMap(t => {
      const causes = Object.entries(t.causes);
      const open = el("a", { href: "#conflicts", on: { click: ev => { ev.preventDefault();
        state.conflict = { cid: c.cluster_id, table: t.table, cause: "", key: "", limit: 100 };
        refresh(); } } }, t.table);
      if (!causes.length) {
        return [el("tr", { "data-cluster": c.cluster_id, "data-table": t.table },
          el("td", {}, open), cell("cause", t.error ? "" : "none"),
          cell("count", "0", "num"), cell("error", t.error))];
      }
      return causes.map(([cause, n]) => el("tr", { "data-cluster": c.cluster_id,
        "data-table": t.table, "data-cause": cause },
        el("td", {}, open), cell("cause", cause), cell("count", n, "num"), cell("error", "")));
    });
    parts.push(rows.length ? table(["table", "cause", "rows", "error"], rows)
      : el("p", { class: "muted" }, "no exceptions tables known (gateway console --conflict-table)"));
  }
  if (state.conflict) parts.push(await conflictRows(state.conflict));
  v.replaceChildren(...parts);
}

async function conflictRows(q) {
  const box = el("div", { id: "conflict-rows" });
  const cause = el("input", { name: "cause", value: q.cause, placeholder: "cause" });
  const key = el("input", { name: "key", value: q.key, placeholder: "COL=VALUE (* ?)" });
  const limit = el("input", { name: "limit", value: q.limit, size: 5 });
  const form = el("form", { class: "filter", on: { submit: ev => { ev.preventDefault();
    Object.assign(q, { cause: cause.value, key: key.value, limit: Number(limit.value) || 100 });
    refresh(); } } }, `cluster ${q.cid} · ${q.table}`, cause, key, limit,
    el("button", { type: "submit" }, "filter"));
  box.append(el("h2", {}, "Exception rows"), form);
  const params = new URLSearchParams({ cause: q.cause, key: q.key, limit: q.limit });
  try {
    const doc = await api(`conflicts/${q.cid}/${encodeURIComponent(q.table)}?${params}`);
    box.append(el("p", { class: "muted", "data-field": "matched" },
                  `${doc.matched} of ${doc.total} rows match`),
               el("p", { class: "muted", "data-field": "rows_age" },
                  `rows as read ${doc.age_seconds.toFixed(1)} s ago (read again at most every 2 s)`));
    const fmt = o => el("pre", {}, Object.entries(o).map(([k, v2]) => `${k}=${JSON.stringify(v2)}`).join("\n"));
    box.append(table([state.session.admin ? "" : null, "id", "op", "cause", "key", "old (here)",
                      "new (rejected)", "replayed"].filter(h => h !== null),
      doc.rows.map(r => el("tr", { "data-id": r.id },
        state.session.admin ? el("td", {}, el("input", { type: "checkbox", value: r.id })) : null,
        cell("id", r.id), cell("op", r.op), cell("cause", r.cause),
        el("td", { "data-field": "key" }, fmt(r.key)), el("td", {}, fmt(r.old)),
        el("td", {}, fmt(r.new)), cell("replayed", r.replayed || "")))));
    if (state.session.admin) {
      const what = { replay: "write again (each only if its row is unchanged since)",
                     delete: "delete (handled)" };
      for (const action of ["replay", "delete"]) {
        box.append(el("button", { "data-action": action, on: { click: () => {
          const ids = selected(box);
          if (!ids.length) { showError(`select the rows to ${action} first`); return; }
          act(`conflicts/${q.cid}/${encodeURIComponent(q.table)}/${action}`, { ids },
              `${what[action]}: ${ids.length} exception row(s) of ${q.table} on cluster ${q.cid}?`);
        } } }, `${action} selected rows`));
      }
    }
  } catch (e) { box.append(el("p", { class: "error" }, e.message)); }
  return box;
}

// ---------------------------------------------------------------- loop

async function refresh() {
  clearTimeout(state.timer);
  state.view = (location.hash || "#topology").slice(1);
  for (const s of document.querySelectorAll("section.view")) s.hidden = s.id !== "view-" + state.view;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.view === state.view);
  try {
    const [topo] = await Promise.all([api("topology"), state.sessionReady]);
    if (state.view === "topology") renderTopology(topo);
    else if (state.view === "channels") await renderChannels(topo);
    else if (state.view === "appliers") await renderAppliers();
    else if (state.view === "conflicts") await renderConflicts();
    document.getElementById("updated").textContent =
      "as of " + new Date(topo.taken_at * 1000).toISOString().slice(11, 19) + " UTC";
    document.body.dataset.loaded = state.view;
    if (!window.consoleFirstRender) window.consoleFirstRender = performance.now();
    document.body.dataset.takenAt = String(topo.taken_at);
    showError("");
  } catch (e) { showError(e.message); }
  state.timer = setTimeout(refresh, state.session.interval * 1000);
}

function main() {
  // the session (admin or not) and the first topology are fetched at once
  state.sessionReady = api("session").then(s => { state.session = s; }, e => showError(e.message))
    .then(() => { document.getElementById("mode").textContent = state.session.admin
      ? "admin actions enabled (each asks to confirm)" : "read-only"; });
  window.addEventListener("hashchange", refresh);
  refresh();
}

main();
