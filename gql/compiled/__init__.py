"""The compiled read path: a query's selection answered by one SQL statement.

`fields` reads from the schema which fields are compiled and the SQL of each
(declared in their strawberry metadata); `selection` reads a validated document
into response keys; `plan` binds a request's arguments and compiles the statement
(`store.reads.compiled_sql`) once per document, operation and argument shape; `endpoint`
answers HTTP requests with the statement's JSON, or declines so that strawberry
answers them; `events` renders a live feed event of a plain selection from its values.
"""
