"""The record kind: its declaration, commands (records and asserted edges), projection
rules, and reads (records, gather, asserted edges, traverse, labels, id prefixes)."""
