// The edgeloom live dashboard: a hand-written graphql-transport-ws client for the
// auditEvents subscription, running counts, a per-second chart by kind, and the
// neighbourhood of a clicked record drawn with cytoscape.js. No build step.
"use strict";

(() => {
  const TOKEN_KEY = "edgeloom.token";
  const MAX_ROWS = 300;
  const WINDOW_SECONDS = 60;
  const PALETTE = ["#5fb3f9", "#f9a65f", "#7ddc8a", "#e27de2", "#f2df6b", "#6be0e0", "#ff7b7b", "#b59bff"];
  // The filters are the subscription's own arguments: the gateway sends only what they admit.
  const FEED = `subscription($after: String, $kinds: [String!], $lanes: [String!],
                             $actors: [String!], $match: [String!]) {
    auditEvents(after: $after, kinds: $kinds, lanes: $lanes, actors: $actors, match: $match) {
      id cursor kind recordId lane actor at
    }
  }`;
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
  window.edgeloomDashboard = { state, graph: () => cy };

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
    connect();
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
    const second = Math.floor(Date.now() / 1000);
    if (!state.perSecond.has(second)) state.perSecond.set(second, new Map());
    bump(state.perSecond.get(second), event.kind);
    colour(event.kind);

    const row = document.createElement("tr");
    row.className = "fresh" + (event.recordId ? " record" : "");
    row.dataset.cursor = event.cursor;
    const at = new Date(event.at);
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
    if (event.recordId) {
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

  // -- the chart: events per second by kind, last minute ---------------------------

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
    const now = Math.floor(Date.now() / 1000);
    for (const second of state.perSecond.keys()) {
      if (second < now - WINDOW_SECONDS) state.perSecond.delete(second);
    }
    const kinds = [...state.colours.keys()];
    let peak = 1;
    for (const counts of state.perSecond.values()) {
      for (const n of counts.values()) peak = Math.max(peak, n);
    }
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
    g.fillText(`-${WINDOW_SECONDS}s`, left, height - 2);
    g.fillText("now", width - 28, height - 2);
    for (const kind of kinds) {
      g.strokeStyle = colour(kind);
      g.lineWidth = 2;
      g.beginPath();
      for (let i = 0; i <= WINDOW_SECONDS; i++) {
        const second = now - WINDOW_SECONDS + i;
        const n = (state.perSecond.get(second) || new Map()).get(kind) || 0;
        const x = left + (plotWidth * i) / WINDOW_SECONDS;
        const y = 4 + plotHeight * (1 - n / peak);
        if (i === 0) g.moveTo(x, y);
        else g.lineTo(x, y);
      }
      g.stroke();
    }
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

  function snippet(text) {
    return text.length > 40 ? `${text.slice(0, 39)}…` : text;
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
    nodes.set(record.id, { data: { id: record.id, label: `${short(record.id)}\n${snippet(record.content)}` }, classes: "focus" });
    for (const ep of record.edgeProperties) {
      const hyper = `ep:${ep.property}`;
      nodes.set(hyper, { data: { id: hyper, label: `${ep.property} (${ep.memberCount})` }, classes: "hyperedge" });
      edges.push({ data: { id: `${record.id}->${hyper}`, source: record.id, target: hyper } });
      for (const member of ep.members.items) {
        if (!nodes.has(member.id)) {
          nodes.set(member.id, { data: { id: member.id, label: `${short(member.id)}\n${snippet(member.content)}` }, classes: "record" });
        }
        if (member.id !== record.id) {
          edges.push({ data: { id: `${member.id}->${hyper}`, source: member.id, target: hyper } });
        }
      }
    }
    // Typed edges: drawn as arrows between the records, labelled with type and weight.
    const typed = [...body.data.related.outgoing.items, ...body.data.related.incoming.items];
    for (const edge of typed) {
      const other = edge.toRecord || edge.fromRecord;
      if (other && !nodes.has(other.id)) {
        nodes.set(other.id, { data: { id: other.id, label: `${short(other.id)}\n${snippet(other.content)}` }, classes: "record" });
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
    state.graphRecords = new Set([...nodes.keys()].filter((id) => !id.startsWith("ep:")));
    const elements = [...nodes.values(), ...edges];
    if (cy) cy.destroy();
    cy = cytoscape({
      container: $("graph"),
      elements,
      style: [
        { selector: "node", style: { label: "data(label)", color: "#dce6f0", "font-size": 9, "text-wrap": "wrap", "text-valign": "bottom", "text-margin-y": 4 } },
        { selector: "node.record", style: { "background-color": "#5fb3f9", width: 16, height: 16 } },
        { selector: "node.focus", style: { "background-color": "#f9a65f", width: 26, height: 26, "font-weight": "bold" } },
        { selector: "node.hyperedge", style: { shape: "diamond", "background-color": "#7ddc8a", width: 18, height: 18 } },
        { selector: "edge", style: { width: 1.5, "line-color": "#3b5670", "curve-style": "bezier" } },
        {
          selector: "edge.typed",
          style: {
            width: 2.5, "line-color": "#e27de2", "target-arrow-color": "#e27de2", "target-arrow-shape": "triangle",
            label: "data(label)", color: "#e9c6e9", "font-size": 9, "text-rotation": "autorotate", "text-margin-y": -6,
          },
        },
      ],
      layout: { name: "cose", animate: false, padding: 20, nodeRepulsion: () => 9000 },
      wheelSensitivity: 0.3,
    });
    cy.on("tap", "node.record", (event) => select(event.target.id(), null));
    // A typed edge says what shows it: its evidence quote, or that it was asserted without.
    cy.on("tap mouseover", "edge.typed", (event) => {
      const edge = event.target;
      $("edge-info").textContent = `${edge.data("about")}\n${edge.data("evidence")}`;
      $("edge-info").dataset.edge = edge.id();
    });
    window.edgeloomDashboard.cy = cy;
    const hyperedges = record.edgeProperties.length;
    $("graph-info").textContent =
      `${record.lane} · ${record.sourceType} · version ${record.version} · ` +
      `${hyperedges} hyperedge${hyperedges === 1 ? "" : "s"}, ${typed.length} typed edge${typed.length === 1 ? "" : "s"}, ` +
      `${state.graphRecords.size - 1} neighbour record(s)`;
    $("edge-info").textContent = typed.length ? "hover or click a typed edge for its evidence" : "";
  }

  renderChart();
  start();
})();
