"""The correction kind: its declaration and its command."""
