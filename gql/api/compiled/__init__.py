"""The compiled read path: a query's selection answered by one SQL statement.

`fields` reads from the schema which fields are compiled and the SQL of each
(declared in their strawberry metadata); `selection` reads a validated document
into response keys; `plan` binds a request's arguments and compiles the statement
(`store.reads.compiled_sql`) once per document, operation and argument shape. The
types declare their fields here; what answers with a plan sits above them:
`gql.api.compiled_writes`, `gql.api.compiled_events` (a live feed event of a plain
selection, from its values) and `gql.server.compiled_endpoint` (HTTP requests answered with
the statement's JSON, or declined so that strawberry answers them).
"""
