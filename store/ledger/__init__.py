"""The one write path: commands, the executor that runs them, the append statement,
the hash chain, group commit, and the audit events an entry implies."""
