"""Search: records by their words, by the caller's vector, or both (`statement` says how
it reads and ranks, `planner` how a text query is read, `compiled_json` the hits' fields
on the compiled path)."""
