"""How a process's file descriptors are shared out between long-lived sockets and the
rest, for both caps that guard them (gql.server.sockets for WebSockets, gql.server.waiting for
connections waiting for their headers)."""

from __future__ import annotations

# Descriptors kept out of the WebSocket caps for HTTP clients, the database pools, the
# listener, log and key files; at most a quarter of a small open-file limit.
HTTP_HEADROOM = 1024
# A refused connection is logged at most once per cap in this many seconds.
LOG_EVERY_SECONDS = 10.0
