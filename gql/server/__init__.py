"""The gateway as a server: the ASGI app and its layers, serving, sockets, the views."""
