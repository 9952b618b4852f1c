"""The live dashboard: a page served from the package that subscribes to the feed.

`GET /dashboard` serves ``static/dashboard/index.html``; its script, style and the
vendored cytoscape.js are under :data:`STATIC_PATH`. Nothing is fetched from a CDN.
"""

from __future__ import annotations

import functools
import pathlib

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from gql.server.headers import DASHBOARD_HEADERS

STATIC_DIR: pathlib.Path = pathlib.Path(__file__).resolve().parent / "static" / "dashboard"
STATIC_PATH = "/dashboard/static"


@functools.cache
def _page() -> str:
    return (STATIC_DIR / "index.html").read_text(encoding="utf-8")


async def dashboard(request: Request) -> HTMLResponse:
    return HTMLResponse(_page(), headers=DASHBOARD_HEADERS)


def dashboard_routes() -> list[BaseRoute]:
    """The page and its assets, for the app's route list."""
    return [
        Route("/dashboard", dashboard, methods=["GET"]),
        Mount(STATIC_PATH, app=StaticFiles(directory=STATIC_DIR)),
    ]
