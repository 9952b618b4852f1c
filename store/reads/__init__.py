"""What every kind's reads share: the visibility rule, the read snapshot, cursor pages,
fixed-text statements, and the compiled one-statement reads."""
