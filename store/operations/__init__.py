"""Operating the ledger: migrations, runtime roles, tokens, checkpoints and their
signing, verify, export and import."""
