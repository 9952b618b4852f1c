"""The `edgeloom` command line: serve, mcp, migrate, verify, intake, and bearer tokens."""
