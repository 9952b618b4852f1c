"""Security headers on every HTTP response of the gateway.

No response may be framed by another page (`frame-ancestors 'none'`, and
`X-Frame-Options: DENY` for browsers older than CSP 2) or read as a type other than the
one it declares (`nosniff`). The two pages, the dashboard (which keeps a token in local
storage) and GraphiQL, send `page_policy`: scripts, styles and connections from the
gateway only, none inline; every other response sends `API_POLICY`, which allows nothing.
"""

from __future__ import annotations

from starlette.types import Message


def page_policy(*style_hashes: str) -> str:
    """The policy of a page: its scripts, styles, images, fonts and connections (the
    WebSocket too) from the gateway only, and the inline `<style>` elements of these
    hashes (`sha256-...`); nothing inline otherwise."""
    styles = " ".join(["'self'", *(f"'{digest}'" for digest in style_hashes)])
    return (
        f"default-src 'none'; script-src 'self'; style-src {styles}; img-src 'self' data:; "
        "font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )


API_POLICY = "default-src 'none'; frame-ancestors 'none'"
# cytoscape.js adds one <style> element, always `.__________cytoscape_container {
# position: relative; }`.
DASHBOARD_HEADERS = {
    "content-security-policy": page_policy("sha256-pgvDUBa4IjFA2yuSJ2cqcyxmNYJMborsd0ORcRv9vw8=")
}
# GraphiQL's dialogs (react-remove-scroll) add one <style> element, always the same on
# this page, whose body has overflow: hidden.
GRAPHIQL_HEADERS = {
    "content-security-policy": page_policy("sha256-Y/huXlwoYkVyQlxwSVcCi1RCDGDCSVBzDt0hYP9qlTc=")
}

_POLICY = b"content-security-policy"
_ALWAYS = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY")]
_DEFAULT = [*_ALWAYS, (_POLICY, API_POLICY.encode())]


API_HEADER_LINES = tuple(_DEFAULT)


class SecuredHeaders(list[tuple[bytes, bytes]]):
    """A response's header lines made with `API_HEADER_LINES` among them, which
    `with_security_headers` passes as they are: the compiled path's answers carry them
    from lines encoded once, and no copy of the message is made per response."""


def with_security_headers(message: Message) -> Message:
    """An `http.response.start` message with the headers added; a response's own policy
    is kept. Called by `gql.server.front.Front` on every HTTP response."""
    if isinstance(message.get("headers"), SecuredHeaders):
        return message
    headers = list(message.get("headers", ()))
    own = any(name.lower() == _POLICY for name, _ in headers)
    return {**message, "headers": headers + (_ALWAYS if own else _DEFAULT)}
