"""The answer to an operation stopped at the time limit of one request: the same words,
code and details over every transport (HTTP, WebSocket, MCP)."""

from __future__ import annotations

from store.errors import TimedOutError

CODE = TimedOutError.code


def stopped_message(seconds: float, completed: int) -> str:
    """Why the operation stopped, and what of its writes was written."""
    if completed:
        written = (
            f"; {completed} of its writes had been made before it stopped (their results "
            "are not in this answer: read them back) and nothing after them was"
        )
    else:
        written = "; nothing it asked to write was written"
    return (
        f"the request was stopped after {seconds:g} seconds, the most one request may run; "
        f"ask for less (a smaller first:, fewer nested lists) or split the work{written}"
    )


def stopped_details(seconds: float, completed: int) -> dict[str, object]:
    """The error's extensions besides its code."""
    return {"timeoutSeconds": seconds, "completedWrites": completed}
