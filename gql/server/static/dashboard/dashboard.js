// The edgeloom live dashboard: a hand-written graphql-transport-ws client for the
// auditEvents subscription (opening on the recent past), running counts, a chart of events
// per second by kind, and the neighbourhood of a clicked record drawn with cytoscape.js.
// No build step.
"use strict";

(() => {
  const TOKEN_KEY = "edgeloom.token";
  const MAX_ROWS = 300;
  // Opened without ?after=, the page replays this many of the newest events, then goes live.
  const REPLAY_EVENTS = 200;
  // The chart spans at least this, and back to the oldest event in the table.
  const WINDOW_SECONDS = 60;
  const CHART_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
  const CHART_BARS = 90;
  // Screen pixels either side of a typed edge's line that still hover it.
  const EDGE_REACH = 14;
  // Room kept between the boxes of nodes with their labels, in graph units.
  const LABEL_GAP = 6;
  const PALETTE = ["#5fb3f9", "#f9a65f", "#7ddc8a", "#e27de2", "#f2df6b", "#6be0e0", "#ff7b7b", "#b59bff"];
  // The filters are the subscription's own arguments: the gateway sends only what they admit.
  const FEED = `subscription($after: String, $kinds: [String!], $lanes: [String!],
                             $actors: [String!], $match: [String!]) {
    auditEvents(after: $after, kinds: $kinds, lanes: $lanes, actors: $actors, match: $match) {
      id cursor kind recordId lane actor at
    }
  }`;
  const NEWEST = `query($last: Int) { audit(last: $last) { items { cursor } } }`;
  const FILTERS = { kind: "kinds", lane: "lanes", agent: "actors", match: "match" };
  const NEIGHBOURHOOD = `query($id: ID!) {
    record(id: $id) {
      id lane sourceType version content
      edgeProperties { property label memberCount members(first: 25) { items { id content lane } } }
    }
    related(id: $id) {
      outgoing(first: 50) { items { ...typed toRecord { id content } } }
      incoming(first: 50) { items { ...typed fromRecord { id content } } }
    }
  }
  fragment typed on Edge { id fromId toId type weight provenanceType provenanceActor detector evidence }`;

  const $ = (id) => document.getElementById(id);
  const endpoint = new URL("/graphql", location.href).href;
  const socketUrl = endpoint.replace(/^http/, "ws");
  const params = new URLSearchParams(location.search);

  const state = {
    token: localStorage.getItem(TOKEN_KEY) || "",
    // The cursor of the last event shown: a reconnect resumes after it, so nothing is missed.
    last: params.get("after"),
    // The cursor the page started after (?after=, or found for the replay), and how.
    from: params.get("after"),
    fromHow: params.get("after") === null ? null : "?after=",
    total: 0,
    counts: { kind: new Map(), lane: new Map(), agent: new Map() },
    perSecond: new Map(), // unix second -> Map(kind -> count)
    colours: new Map(),
    selected: null,
    graphRecords: new Set(),
    socket: null,
    retries: 0,
    stopped: false,
    paused: false,
    operation: null, // the id of the socket's one subscription
    // Messages the socket delivered (events), whatever is shown: the filters are the server's.
    received: 0,
    filters: {},
  };
  for (const [field, argument] of Object.entries(FILTERS)) {
    const values = listed(params.get(field) || "");
    if (values.length) state.filters[argument] = values;
    $(`f-${field}`).value = values.join(", ");
  }

  function listed(text) {
    return text.split(",").map((v) => v.trim()).filter((v) => v);
  }
  let cy = null;
  let chart = null; // what the last frame of the chart drew
  window.edgeloomDashboard = { state, graph: () => cy, chart: () => chart };

  // -- talking to the gateway ---------------------------------------------------

  async function query(text, variables) {
    const headers = { "content-type": "application/json" };
    if (state.token) headers.authorization = `Bearer ${state.token}`;
    const response = await fetch(endpoint, {
      method: "POST",
      headers,
      body: JSON.stringify({ query: text, variables: variables || {} }),
    });
    return response.json();
  }

  function setStatus(kind, text) {
    const status = $("status");
    status.className = `status ${kind}`;
    status.textContent = text;
  }

  async function start() {
    let body;
    try {
      body = await query("{ profile { agent readLanes } }");
    } catch (err) {
      setStatus("down", "gateway unreachable; retrying");
      setTimeout(start, 2000);
      return;
    }
    if (body.errors) {
      const error = body.errors[0];
      if ((error.extensions || {}).code === "UNAUTHENTICATED") {
        showLogin(state.token ? error.message : null);
      } else {
        setStatus("down", error.message);
      }
      return;
    }
    const profile = body.data.profile;
    $("who").textContent = `agent ${profile.agent} · reads ${profile.readLanes.join(", ") || "no lanes"}`;
    $("forget").hidden = !state.token;
    $("login").hidden = true;
    $("board").hidden = false;
    $("filters").hidden = false;
    state.stopped = false;
    if (state.fromHow === null) await findReplayStart();
    $("since").textContent = sinceText();
    connect();
  }

  // The cursor before the newest REPLAY_EVENTS events the caller may read ("0" when the
  // feed holds fewer): the subscription replays what follows it, then goes live.
  async function findReplayStart() {
    const body = await query(NEWEST, { last: REPLAY_EVENTS + 1 });
    if (body.errors) {
      state.fromHow = `live only (${body.errors[0].message})`;
      return;
    }
    const items = body.data.audit.items;
    state.from = items.length > REPLAY_EVENTS ? items[0].cursor : "0";
    state.last = state.from;
    state.fromHow = "replay";
  }

  function sinceText() {
    if (state.from === null) return state.fromHow;
    if (state.fromHow === "?after=") return `after cursor ${state.from} (?after=), then live`;
    if (state.from === "0") return "after cursor 0: every event, then live";
    return `after cursor ${state.from}: the last ${REPLAY_EVENTS} at open, then live`;
  }

  function showLogin(problem) {
    state.stopped = true;
    $("board").hidden = true;
    $("filters").hidden = true;
    $("login").hidden = false;
    $("forget").hidden = true;
    setStatus("down", "needs a token");
    $("login-problem").hidden = !problem;
    $("login-problem").textContent = problem || "";
  }

  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    state.token = $("token").value.trim();
    localStorage.setItem(TOKEN_KEY, state.token);
    $("token").value = "";
    start();
  });

  $("forget").addEventListener("click", () => {
    localStorage.removeItem(TOKEN_KEY);
    state.token = "";
    if (state.socket) state.socket.close(1000);
    start();
  });

  // graphql-transport-ws: connection_init -> connection_ack -> subscribe -> next... / error / complete
  function connect() {
    if (state.stopped) return;
    setStatus("", "connecting…");
    const ws = new WebSocket(socketUrl, "graphql-transport-ws");
    state.socket = ws;
    state.operation = null;
    const send = (message) => ws.send(JSON.stringify(message));
    ws.onopen = () => {
      send({ type: "connection_init", payload: state.token ? { authorization: `Bearer ${state.token}` } : {} });
    };
    ws.onmessage = (raw) => {
      const message = JSON.parse(raw.data);
      if (message.type === "connection_ack") {
        state.retries = 0;
        if (!state.paused) subscribe();
      } else if (message.type === "ping") {
        send({ type: "pong" });
      } else if (message.type === "next") {
        if (message.id !== state.operation) return; // a subscription since replaced
        if (message.payload.errors) {
          ended(message.payload.errors[0]);
        } else {
          shown(message.payload.data.auditEvents);
        }
      } else if (message.type === "error") {
        if (message.id === state.operation) ended(message.payload[0]);
      } else if (message.type === "complete") {
        if (message.id === state.operation) ws.close(1000);
      }
    };
    ws.onclose = (event) => {
      if (state.socket !== ws || state.stopped) return;
      if (event.code === 4403) {
        showLogin("the gateway refused this token (unknown, revoked, or its agent is not in the policy)");
        return;
      }
      const delay = Math.min(10000, 500 * 2 ** state.retries++);
      setStatus("down", `disconnected; resuming in ${Math.round(delay / 100) / 10} s`);
      setTimeout(connect, delay);
    };
  }

  // One subscription at a time; a new filter (or the end of a pause) replaces it, resuming
  // after the last event shown, so nothing that the filter admits is missed.
  let operations = 0;
  function subscribe() {
    const ws = state.socket;
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    if (state.operation) ws.send(JSON.stringify({ id: state.operation, type: "complete" }));
    state.operation = `feed-${++operations}`;
    const variables = { ...state.filters };
    if (state.last) variables.after = state.last;
    ws.send(JSON.stringify({ id: state.operation, type: "subscribe", payload: { query: FEED, variables } }));
    setStatus("live", Object.keys(state.filters).length ? "live · filtered" : "live");
  }

  function pause() {
    const ws = state.socket;
    if (state.operation && ws && ws.readyState === WebSocket.OPEN) {
      ws.send(JSON.stringify({ id: state.operation, type: "complete" }));
    }
    state.operation = null;
    setStatus("paused", `paused after cursor ${state.last || "(none yet)"}`);
  }

  $("filters").addEventListener("submit", (event) => {
    event.preventDefault();
    state.filters = {};
    for (const [field, argument] of Object.entries(FILTERS)) {
      const values = listed($(`f-${field}`).value);
      if (values.length) state.filters[argument] = values;
    }
    $("filter-problem").hidden = true;
    clearBoard();
    if (!state.paused) subscribe();
  });

  $("pause").addEventListener("click", () => {
    state.paused = !state.paused;
    $("pause").textContent = state.paused ? "resume" : "pause";
    $("pause").classList.toggle("paused", state.paused);
    if (state.paused) pause();
    else subscribe();
  });

  function clearBoard() {
    state.total = 0;
    for (const map of Object.values(state.counts)) map.clear();
    state.perSecond.clear();
    $("events").replaceChildren();
    $("total").textContent = "0";
    renderCounts();
  }

  function ended(error) {
    const code = (error.extensions || {}).code;
    if (code === "UNAUTHENTICATED") {
      showLogin(error.message);
      if (state.socket) state.socket.close(1000);
      return;
    }
    if (code === "BAD_USER_INPUT" || code === "NOT_FOUND") {
      // A filter the gateway refused (an unknown kind, a lane not readable): say so, and wait.
      $("filter-problem").textContent = error.message;
      $("filter-problem").hidden = false;
      state.operation = null;
      setStatus("down", "filter refused");
      return;
    }
    // A slow-subscriber close says where to resume; `state.last` is that cursor already.
    setStatus("down", error.message);
    if (state.socket) state.socket.close(1000);
  }

  // -- events ---------------------------------------------------------------------

  function colour(kind) {
    if (!state.colours.has(kind)) state.colours.set(kind, PALETTE[state.colours.size % PALETTE.length]);
    return state.colours.get(kind);
  }

  function bump(map, key) {
    map.set(key, (map.get(key) || 0) + 1);
  }

  function shown(event) {
    state.received += 1;
    state.last = event.cursor;
    state.total += 1;
    bump(state.counts.kind, event.kind);
    bump(state.counts.lane, event.lane === null ? "(all lanes)" : event.lane);
    bump(state.counts.agent, event.actor);
    // Counted at the event's own time: a replay spreads over the seconds it was written in.
    const at = new Date(event.at);
    const second = Math.floor(at.getTime() / 1000);
    if (!state.perSecond.has(second)) state.perSecond.set(second, new Map());
    bump(state.perSecond.get(second), event.kind);
    colour(event.kind);

    const row = document.createElement("tr");
    const recent = Date.now() - at.getTime() < 5000;
    row.className = (recent ? "fresh" : "") + (event.recordId ? " record" : "");
    row.dataset.cursor = event.cursor;
    row.dataset.second = String(second);
    const cells = [
      at.toLocaleTimeString(),
      event.cursor,
      event.kind,
      event.lane === null ? "—" : event.lane,
      event.actor,
      event.recordId || "—",
    ];
    for (const text of cells) {
      const cell = document.createElement("td");
      cell.textContent = text;
      row.appendChild(cell);
    }
    row.cells[2].style.color = colour(event.kind);
    row.cells[5].className = "id";
    if (event.recordId) {
      row.cells[5].title = event.recordId; // the whole id, which the cell may cut
      row.dataset.record = event.recordId;
      row.title = "show this record's neighbourhood";
      row.addEventListener("click", () => select(event.recordId, row));
    }
    const body = $("events");
    body.insertBefore(row, body.firstChild);
    while (body.rows.length > MAX_ROWS) body.deleteRow(body.rows.length - 1);
    $("total").textContent = String(state.total);
    renderCounts();
    // A change to a record on the graph redraws it (new values, new members).
    if (event.recordId && state.graphRecords.has(event.recordId)) scheduleGraph();
  }

  function renderCounts() {
    for (const [name, map] of Object.entries(state.counts)) {
      const table = $(`by-${name}`);
      const rows = [...map.entries()].sort((a, b) => b[1] - a[1]).slice(0, 12);
      table.replaceChildren(
        ...rows.map(([key, count]) => {
          const row = document.createElement("tr");
          const label = document.createElement("td");
          label.textContent = key;
          if (name === "kind") label.style.color = colour(key);
          const value = document.createElement("td");
          value.textContent = String(count);
          row.append(label, value);
          return row;
        }),
      );
    }
  }

  // -- the chart: events per second by kind, back to the oldest event in the table ------

  // The seconds the chart spans, in steps of `step` seconds ending with the one holding
  // `now`: at least WINDOW_SECONDS, and back to the oldest second counted.
  function chartWindow(now) {
    let oldest = now - WINDOW_SECONDS + 1;
    for (const second of state.perSecond.keys()) oldest = Math.min(oldest, second);
    const span = now - oldest + 1;
    const step = CHART_STEPS.find((s) => span / s <= CHART_BARS) || Math.ceil(span / CHART_BARS);
    const bars = Math.ceil(span / step);
    const end = (Math.floor(now / step) + 1) * step; // steps aligned, so they do not shift
    return { start: end - bars * step, step, bars };
  }

  function duration(seconds) {
    if (seconds < 120) return `${seconds} s`;
    if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
    if (seconds < 172800) return `${Math.round(seconds / 3600)} h`;
    return `${Math.round(seconds / 86400)} d`;
  }

  // Seconds older than the table's oldest row and than the live window are let go.
  function forgetOldSeconds(now) {
    const rows = $("events").rows;
    const oldestRow = rows.length ? Number(rows[rows.length - 1].dataset.second) : now;
    const keep = Math.min(oldestRow, now - WINDOW_SECONDS);
    for (const second of state.perSecond.keys()) {
      if (second < keep) state.perSecond.delete(second);
    }
  }

  function renderChart() {
    const canvas = $("rate");
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth || 720;
    const height = canvas.clientHeight || 160;
    canvas.width = width * ratio;
    canvas.height = height * ratio;
    const g = canvas.getContext("2d");
    g.scale(ratio, ratio);
    g.clearRect(0, 0, width, height);
    // The gateway's clock stamps the events: never draw one in the future.
    let now = Math.floor(Date.now() / 1000);
    for (const second of state.perSecond.keys()) now = Math.max(now, second);
    forgetOldSeconds(now);
    const { start, step, bars } = chartWindow(now);
    const kinds = [...state.colours.keys()];
    const rates = new Map(kinds.map((kind) => [kind, new Array(bars).fill(0)]));
    for (const [second, counts] of state.perSecond) {
      const bar = Math.floor((second - start) / step);
      if (bar < 0 || bar >= bars) continue;
      for (const [kind, n] of counts) rates.get(kind)[bar] += n / step;
    }
    let peak = 1;
    for (const values of rates.values()) peak = Math.max(peak, ...values);
    const left = 28;
    const plotWidth = width - left - 6;
    const plotHeight = height - 18;
    g.strokeStyle = "#24364a";
    g.fillStyle = "#8aa0b6";
    g.font = "10px system-ui";
    for (const fraction of [0, 0.5, 1]) {
      const y = 4 + plotHeight * (1 - fraction);
      g.beginPath();
      g.moveTo(left, y);
      g.lineTo(width - 6, y);
      g.stroke();
      const value = peak * fraction;
      g.fillText(Number.isInteger(value) ? String(value) : value.toFixed(1), 2, y + 3);
    }
    g.fillText(`-${duration(bars * step)}`, left, height - 2);
    g.fillText("now", width - 28, height - 2);
    const drawn = [];
    const x = (bar) => left + (bars === 1 ? plotWidth : (plotWidth * bar) / (bars - 1));
    for (const kind of kinds) {
      g.strokeStyle = colour(kind);
      g.lineWidth = 2;
      g.beginPath();
      rates.get(kind).forEach((rate, bar) => {
        const y = 4 + plotHeight * (1 - rate / peak);
        if (bar === 0) g.moveTo(x(bar), y);
        else g.lineTo(x(bar), y);
        if (rate > 0) drawn.push({ kind, time: start + bar * step, rate, x: x(bar) });
      });
      g.stroke();
    }
    chart = { start, step, bars, points: drawn };
    $("chart-span").textContent =
      step === 1 ? `(last ${duration(bars)})` : `(last ${duration(bars * step)}, averaged over ${duration(step)})`;
    $("legend").replaceChildren(
      ...kinds.map((kind) => {
        const item = document.createElement("span");
        const swatch = document.createElement("i");
        swatch.style.background = colour(kind);
        item.append(swatch, document.createTextNode(kind));
        return item;
      }),
    );
  }
  setInterval(renderChart, 1000);

  // -- the neighbourhood graph ----------------------------------------------------

  let graphTimer = null;
  function scheduleGraph() {
    clearTimeout(graphTimer);
    graphTimer = setTimeout(() => state.selected && drawGraph(state.selected), 300);
  }

  function select(recordId, row) {
    for (const other of document.querySelectorAll("#events tr.selected")) other.classList.remove("selected");
    if (row) row.classList.add("selected");
    state.selected = recordId;
    drawGraph(recordId);
  }

  function short(id) {
    return id.length > 12 ? `${id.slice(0, 11)}…` : id;
  }

  function snippet(text, length = 40) {
    return text.length > length ? `${text.slice(0, length - 1)}…` : text;
  }

  // A neighbour on one line, short enough that forty of them fit a panel legibly; the
  // id's first 6 hex digits are a prefix the gateway takes when it is unique.
  function neighbour(record) {
    return { data: { id: record.id, label: `${record.id.slice(0, 9)} ${snippet(record.content, 24)}` }, classes: "record" };
  }

  // The evidence of a typed edge as a reader should see it: the quote with where it is
  // from, a detector's rationale as it is, or that the edge is only asserted.
  function evidenceText(evidence) {
    if (evidence === null || evidence === undefined) return "asserted, no evidence";
    const items = Array.isArray(evidence) ? evidence : [evidence];
    if (items.length === 0) return "asserted, no evidence";
    return items
      .map((item) => {
        if (typeof item.quote === "string") {
          const where = [item.source, item.offset].filter((x) => x !== undefined && x !== null).join(":");
          return `“${item.quote}”${where ? ` — ${where}` : ""}`;
        }
        return JSON.stringify(item);
      })
      .join("\n");
  }

  function showEdge(edge) {
    $("edge-info").textContent = `${edge.data("about")}\n${edge.data("evidence")}`;
    $("edge-info").dataset.edge = edge.id();
  }

  function hoverEdge(edge) {
    const hovered = cy.edges(".hovered");
    (edge ? hovered.not(edge) : hovered).removeClass("hovered");
    $("graph").style.cursor = edge ? "pointer" : "";
    if (edge && !edge.hasClass("hovered")) {
      edge.addClass("hovered");
      showEdge(edge);
    }
  }

  function onNode(event) {
    return event.target !== cy && event.target.isNode();
  }

  // The typed edge nearest to a point of the graph, if within EDGE_REACH screen pixels
  // (none for an event emitted without a pointer).
  function nearestTypedEdge(point) {
    if (!point) return null;
    let nearest = null;
    let best = EDGE_REACH / cy.zoom();
    cy.edges(".typed").forEach((edge) => {
      const path = [edge.sourceEndpoint(), ...(edge.controlPoints() || []), edge.targetEndpoint()];
      const d = distanceToPath(point, curve(path));
      if (d <= best) {
        nearest = edge;
        best = d;
      }
    });
    return nearest;
  }

  // Points along an edge drawn as cytoscape draws a bezier edge: one quadratic curve per
  // control point, joined halfway between control points; a straight line without any.
  function curve(path) {
    if (path.length === 2) return path;
    const points = [path[0]];
    let from = path[0];
    for (let i = 1; i < path.length - 1; i++) {
      const control = path[i];
      const last = i === path.length - 2;
      const to = last ? path[i + 1] : { x: (path[i].x + path[i + 1].x) / 2, y: (path[i].y + path[i + 1].y) / 2 };
      for (let k = 1; k <= 12; k++) {
        const t = k / 12;
        const a = (1 - t) * (1 - t);
        const b = 2 * t * (1 - t);
        const c = t * t;
        points.push({ x: a * from.x + b * control.x + c * to.x, y: a * from.y + b * control.y + c * to.y });
      }
      from = to;
    }
    return points;
  }

  function distanceToPath(p, points) {
    let best = Infinity;
    for (let i = 1; i < points.length; i++) {
      const a = points[i - 1];
      const b = points[i];
      const dx = b.x - a.x;
      const dy = b.y - a.y;
      const length = dx * dx + dy * dy;
      const t = length === 0 ? 0 : Math.max(0, Math.min(1, ((p.x - a.x) * dx + (p.y - a.y) * dy) / length));
      best = Math.min(best, Math.hypot(p.x - (a.x + t * dx), p.y - (a.y + t * dy)));
    }
    return best;
  }

  // Lays the neighbourhood out in blocks that cannot overlap: the record on top; under it,
  // for each hyperedge its diamond above its members in rows and columns (the records only
  // typed edges reach in a block of their own), the blocks side by side in lines. Each
  // cell is as large as the largest node with its label. Of the column and line counts
  // tried, the one that fits the panel at the largest zoom wins, so labels stay legible.
  function arrangeInBlocks(graph, focusId, groups) {
    const sizes = new Map(
      graph.nodes().map((node) => {
        const b = node.boundingBox({ includeLabels: true, includeOverlays: false });
        const p = node.position();
        return [node.id(), { w: b.w, h: b.h, dx: p.x - b.x1, dy: p.y - b.y1 }];
      }),
    );
    const members = groups.flatMap((group) => group.members);
    const cellWidth = Math.max(1, ...members.map((id) => sizes.get(id).w)) + LABEL_GAP;
    const cellHeight = Math.max(1, ...members.map((id) => sizes.get(id).h)) + LABEL_GAP / 2;
    const focus = sizes.get(focusId);
    let best = null;
    for (let columns = 1; columns <= 8; columns++) {
      const blocks = groups.map((group) => {
        const hub = group.hub ? sizes.get(group.hub) : { w: 0, h: -LABEL_GAP };
        const across = Math.min(columns, Math.max(1, group.members.length));
        const rows = Math.ceil(group.members.length / columns);
        return { w: Math.max(across * cellWidth, hub.w + LABEL_GAP), h: hub.h + LABEL_GAP + rows * cellHeight };
      });
      for (let lines = 1; lines <= Math.max(1, blocks.length); lines++) {
        const placed = flow(blocks, lines);
        const width = Math.max(placed.width, focus.w);
        const height = focus.h + 3 * LABEL_GAP + placed.height;
        const zoom = Math.min(graph.width() / width, graph.height() / height);
        if (best === null || zoom > best.zoom) best = { zoom, columns, placed, width };
      }
    }
    const at = (id, x, y) => {
      const size = sizes.get(id);
      graph.getElementById(id).position({ x: x + size.dx, y: y + size.dy });
    };
    graph.batch(() => {
      at(focusId, (best.width - focus.w) / 2, 0);
      groups.forEach((group, n) => {
        const { x, y } = best.placed.at[n];
        const top = y + focus.h + 3 * LABEL_GAP;
        let below = top;
        if (group.hub) {
          at(group.hub, x, top);
          below += sizes.get(group.hub).h + LABEL_GAP;
        }
        group.members.forEach((id, i) => {
          at(id, x + (i % best.columns) * cellWidth, below + Math.floor(i / best.columns) * cellHeight);
        });
      });
    });
  }

  // Blocks in about `lines` lines of similar width: where each block's top left goes.
  function flow(blocks, lines) {
    const gap = 4 * LABEL_GAP;
    const total = blocks.reduce((sum, block) => sum + block.w + gap, 0);
    const target = total / lines;
    const at = [];
    let x = 0;
    let y = 0;
    let lineHeight = 0;
    let width = 0;
    for (const block of blocks) {
      if (x > 0 && x + block.w > target) {
        y += lineHeight + gap;
        x = 0;
        lineHeight = 0;
      }
      at.push({ x, y });
      width = Math.max(width, x + block.w);
      lineHeight = Math.max(lineHeight, block.h);
      x += block.w + gap;
    }
    return { at, width, height: y + lineHeight };
  }

  async function drawGraph(recordId) {
    $("graph-title").textContent = recordId;
    const body = await query(NEIGHBOURHOOD, { id: recordId });
    if (body.errors || !body.data.record) {
      $("graph-info").textContent = body.errors ? body.errors[0].message : "this record is not readable by you";
      return;
    }
    const record = body.data.record;
    const nodes = new Map();
    const edges = [];
    const groups = []; // the blocks of the layout: a hub and the records placed under it
    nodes.set(record.id, { data: { id: record.id, label: `${short(record.id)}\n${snippet(record.content)}` }, classes: "focus" });
    for (const ep of record.edgeProperties) {
      const hyper = `ep:${ep.property}`;
      nodes.set(hyper, { data: { id: hyper, label: `${ep.property} (${ep.memberCount})` }, classes: "hyperedge" });
      edges.push({ data: { id: `${record.id}->${hyper}`, source: record.id, target: hyper } });
      const group = { hub: hyper, members: [] };
      groups.push(group);
      for (const member of ep.members.items) {
        if (!nodes.has(member.id)) {
          nodes.set(member.id, neighbour(member));
          group.members.push(member.id);
        }
        if (member.id !== record.id) {
          edges.push({ data: { id: `${member.id}->${hyper}`, source: member.id, target: hyper } });
        }
      }
    }
    // Typed edges: drawn as arrows between the records, labelled with type and weight.
    const typed = [...body.data.related.outgoing.items, ...body.data.related.incoming.items];
    const reached = { hub: null, members: [] };
    for (const edge of typed) {
      const other = edge.toRecord || edge.fromRecord;
      if (other && !nodes.has(other.id)) {
        nodes.set(other.id, neighbour(other));
        reached.members.push(other.id);
      }
      edges.push({
        data: {
          id: edge.id,
          source: edge.fromId,
          target: edge.toId,
          label: `${edge.type} ${edge.weight}`,
          evidence: evidenceText(edge.evidence),
          about: `${edge.type} · weight ${edge.weight} · ${edge.provenanceType} ${edge.provenanceActor} · ${edge.detector}`,
        },
        classes: "typed",
      });
    }
    if (reached.members.length) groups.push(reached);
    state.graphRecords = new Set([...nodes.keys()].filter((id) => !id.startsWith("ep:")));
    // Said before the graph is fitted: these lines take from the graph's height.
    const hyperedges = record.edgeProperties.length;
    $("graph-info").textContent =
      `${record.lane} · ${record.sourceType} · version ${record.version} · ` +
      `${hyperedges} hyperedge${hyperedges === 1 ? "" : "s"}, ${typed.length} typed edge${typed.length === 1 ? "" : "s"}, ` +
      `${state.graphRecords.size - 1} neighbour record(s)`;
    $("edge-info").textContent = typed.length ? "hover or click a typed edge for its evidence" : "";
    const elements = [...nodes.values(), ...edges];
    if (cy) cy.destroy();
    cy = cytoscape({
      container: $("graph"),
      elements,
      style: [
        {
          selector: "node",
          style: {
            label: "data(label)", color: "#dce6f0", "font-size": 9, "text-wrap": "wrap",
            "text-valign": "center", "text-halign": "right", "text-margin-x": 4,
            // Lines passing under a label do not cross its letters.
            "text-background-color": "#0c131b", "text-background-opacity": 0.85, "text-background-padding": 1,
          },
        },
        { selector: "node.record", style: { "background-color": "#5fb3f9", width: 12, height: 12 } },
        {
          selector: "node.focus",
          style: {
            "background-color": "#f9a65f", width: 22, height: 22, "font-weight": "bold",
            "text-valign": "bottom", "text-halign": "center", "text-margin-x": 0, "text-margin-y": 4,
          },
        },
        { selector: "node.hyperedge", style: { shape: "diamond", "background-color": "#7ddc8a", width: 16, height: 16 } },
        { selector: "edge", style: { width: 1.5, "line-color": "#3b5670", "curve-style": "bezier" } },
        {
          selector: "edge.typed",
          style: {
            width: 2.5, "line-color": "#e27de2", "target-arrow-color": "#e27de2", "target-arrow-shape": "triangle",
            label: "data(label)", color: "#e9c6e9", "font-size": 9, "text-rotation": "autorotate", "text-margin-y": -6,
          },
        },
        { selector: "edge.typed.hovered", style: { width: 4.5, "line-color": "#f3a6f3", "target-arrow-color": "#f3a6f3" } },
      ],
      layout: { name: "preset" },
      maxZoom: 2,
      wheelSensitivity: 0.3,
    });
    arrangeInBlocks(cy, record.id, groups);
    cy.fit(undefined, 12);
    cy.on("tap", "node.record", (event) => select(event.target.id(), null));
    // A typed edge says what shows it: its evidence quote, or that it was asserted without.
    // Its hover target reaches EDGE_REACH pixels either side of the line, which is thinner.
    cy.on("tap mouseover", "edge.typed", (event) => showEdge(event.target));
    cy.on("mousemove", (event) => hoverEdge(onNode(event) ? null : nearestTypedEdge(event.position)));
    cy.on("tap", (event) => {
      const edge = onNode(event) ? null : nearestTypedEdge(event.position);
      if (edge) showEdge(edge);
    });
    window.edgeloomDashboard.cy = cy;
  }

  renderChart();
  start();
})();
