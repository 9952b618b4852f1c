// Subscribes to auditEvents with the graphql-ws reference client and prints each
// event as one JSON line; exits after COUNT events, or with status 1 on an error.
// usage: node subscribe.mjs WS_URL AFTER COUNT [TOKEN]
import { createClient } from "graphql-ws";
import WebSocket from "ws";

const [url, after, count, token] = process.argv.slice(2);
const client = createClient({
  url,
  webSocketImpl: WebSocket,
  connectionParams: token ? { authorization: `Bearer ${token}` } : {},
  retryAttempts: 0,
});

let seen = 0;
const query = `subscription($after: String) {
  auditEvents(after: $after) { id cursor kind recordId lane actor at }
}`;
const unsubscribe = client.subscribe(
  { query, variables: { after } },
  {
    next: (result) => {
      if (result.errors) {
        console.error(JSON.stringify(result.errors));
        process.exit(1);
      }
      console.log(JSON.stringify(result.data.auditEvents));
      seen += 1;
      if (seen >= Number(count)) {
        unsubscribe();
        client.dispose();
      }
    },
    error: (err) => {
      console.error(err instanceof Error ? err.message : JSON.stringify(err));
      process.exit(1);
    },
    complete: () => {},
  },
);
// Tell the test the socket is up: graphql-ws opens it lazily, on subscribe.
client.on("connected", () => console.error("connected"));
