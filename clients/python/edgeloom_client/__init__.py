"""A typed Python client of the edgeloom gateway, generated from its schema and the
operations in `operations/` (ariadne-codegen), sync (`Edgeloom`) and async
(`AsyncEdgeloom`); refusals raise `EdgeloomError` with the gateway's code and message."""

from edgeloom_client.client import AsyncEdgeloom, Edgeloom, graphql_url
from edgeloom_client.errors import EdgeloomError

# The generated inputs, one class for both clients (each sends a model as its fields).
from edgeloom_client.sync_client import GatherMode, IngestInput

__all__ = ["AsyncEdgeloom", "Edgeloom", "EdgeloomError", "GatherMode", "IngestInput", "graphql_url"]
