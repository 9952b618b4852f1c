"""GraphiQL served from files shipped in the package, so the IDE works offline.

The page (``static/graphiql/index.html``) loads React, ReactDOM and GraphiQL from
:data:`STATIC_PATH`, where the application mounts :func:`static_app`; nothing is fetched from a
CDN. Queries and mutations go to ``/graphql`` over HTTP POST, subscriptions over a WebSocket on
the same path (``graphql-transport-ws``), and the headers typed in the IDE's Headers tab are sent
with both (in the ``connection_init`` payload, with lower-cased names, for the WebSocket).
"""

from __future__ import annotations

import functools
import pathlib

from starlette.staticfiles import StaticFiles

STATIC_DIR: pathlib.Path = pathlib.Path(__file__).resolve().parent / "static" / "graphiql"
"""The folder holding ``index.html`` and the vendored GraphiQL assets."""

STATIC_PATH = "/graphiql/static"
"""URL path the assets are mounted at; ``index.html`` refers to its files under it."""


@functools.cache
def graphiql_html() -> str:
    """Return the GraphiQL page, read from the package once and then cached."""
    return (STATIC_DIR / "index.html").read_text(encoding="utf-8")


def static_app() -> StaticFiles:
    """Return an ASGI app serving the GraphiQL assets; mount it at :data:`STATIC_PATH`."""
    return StaticFiles(directory=STATIC_DIR)
