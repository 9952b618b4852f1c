"""The audit trail and the live feed read from it."""
