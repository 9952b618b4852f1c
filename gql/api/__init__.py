"""The GraphQL API: schema, types, inputs, resolvers, a caller's session, the compiled path."""
