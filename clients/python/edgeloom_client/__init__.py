"""A typed Python client of the edgeloom gateway, generated from its schema and the
operations in `operations/` (ariadne-codegen), sync (`Edgeloom`) and async
(`AsyncEdgeloom`); refusals raise `EdgeloomError` with the gateway's code and message."""

from edgeloom_client.client import AsyncEdgeloom, Edgeloom, graphql_url
from edgeloom_client.errors import EdgeloomError

__all__ = ["AsyncEdgeloom", "Edgeloom", "EdgeloomError", "graphql_url"]
