"""Policy: lanes, source types and agent profiles, loaded from YAML and checked purely.

Nothing here does I/O; callers pass the policy text in and act on the decisions out.
"""
