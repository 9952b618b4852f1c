"""The live feed: one hub per process fanning audit events out to its subscribers."""
