// The page's own script (not vendored): GraphiQL with a fetcher for /graphql over HTTP and
// WebSocket. In a file, not inline, so the page's Content-Security-Policy needs no 'unsafe-inline'.
(function () {
  "use strict";

  var DEFAULT_QUERY = [
    "# edgeloom GraphiQL",
    "#",
    "# Queries and mutations: HTTP POST to /graphql.",
    "# Subscriptions: WebSocket on /graphql",
    "# (graphql-transport-ws).",
    "#",
    "# To authenticate, put this in the Headers tab:",
    '#   {"Authorization": "Bearer <token>"}',
    "# Subscriptions get it in connection_init as",
    '#   {"authorization": "Bearer <token>"}',
    "#",
    "# Run: Ctrl-Enter. Autocomplete: Ctrl-Space.",
    "",
    "{",
    "  labels {",
    "    label",
    "    recordCount",
    "  }",
    "}",
    "",
  ].join("\n");

  var httpUrl = window.location.origin + "/graphql";
  var wsUrl =
    (window.location.protocol === "https:" ? "wss://" : "ws://") +
    window.location.host +
    "/graphql";

  // GraphiQL's fetcher sends the Headers-editor values with every HTTP request and, for a
  // subscription, merges them into the graphql-ws connection_init payload. Header names
  // are case-insensitive over HTTP but not inside that payload, so lower-case them: a
  // typed "Authorization" arrives as {"authorization": "Bearer ..."} on both transports.
  var baseFetcher = GraphiQL.createFetcher({
    url: httpUrl,
    subscriptionUrl: wsUrl,
  });

  function lowerCaseKeys(headers) {
    if (!headers || typeof headers !== "object") {
      return headers;
    }
    var out = {};
    Object.keys(headers).forEach(function (name) {
      out[name.toLowerCase()] = headers[name];
    });
    return out;
  }

  function fetcher(params, opts) {
    var options = Object.assign({}, opts || {});
    options.headers = lowerCaseKeys(options.headers);
    return baseFetcher(params, options);
  }

  var root = ReactDOM.createRoot(document.getElementById("graphiql"));
  root.render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      defaultQuery: DEFAULT_QUERY,
      isHeadersEditorEnabled: true,
      // Tokens stay in memory only: nothing typed in the Headers tab is written to
      // localStorage.
      shouldPersistHeaders: false,
      // Open the Headers tab, where the Authorization header goes.
      defaultEditorToolsVisibility: "headers",
      inputValueDeprecation: true,
    }),
  );
})();
