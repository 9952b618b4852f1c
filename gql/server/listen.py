"""Whether `edgeloom serve` can listen where it is asked, found before anything starts.

uvicorn binds its socket only after migrations and the embedded PostgreSQL's start-up;
a port held by another program would be found only then, and a script polling the port
meanwhile would be answered by that program.
"""

from __future__ import annotations

import errno
import socket


def listen_problem(host: str, port: int) -> str | None:
    """Why the gateway cannot listen on host:port (a message naming the port and
    `--port`), or None. The socket is bound as uvicorn binds it and let go at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (
                    f"port {port} on {host} is in use by another program; stop it, or pass "
                    "--port with a free port"
                )
            return f"cannot listen on {host} port {port} ({exc.strerror}); check --host and --port"
    return None
