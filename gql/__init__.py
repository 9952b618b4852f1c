"""edgeloom's GraphQL surface: the server, the API, the feed, MCP and the command line."""

from __future__ import annotations

from importlib.metadata import version


def edgeloom_version() -> str:
    """The installed package's version, as `pip show edgeloom` gives it."""
    return version("edgeloom")
