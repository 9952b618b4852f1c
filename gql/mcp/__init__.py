"""The MCP tools: the same engine as GraphQL, served to agents over the Model Context
Protocol (streamable HTTP at /mcp, and `edgeloom mcp` over stdio)."""
