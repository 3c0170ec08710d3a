"""The app's routes as templates and methods, matched against a request before routing.

Metrics label requests with the route template (`/v1/batches/{job_id}`), never the raw
path, and the methods middleware answers OPTIONS and corrects `Allow` from the methods
of *every* route on a path: Starlette's 405 lists only the first route that matched the
path (`Allow: POST` for /v1/batches, which also takes GET; issue 18 item 17).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from starlette.routing import BaseRoute
from starlette.types import Scope

__all__ = ["METHODS", "RouteMatch", "RouteTable", "app_path"]


# The standard methods (RFC 9110 and PATCH), in the order `Allow` lists them.
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE")


class _HasRoutes(Protocol):
    @property
    def routes(self) -> Sequence[BaseRoute]: ...


class RouteMatch:
    """The routes whose path matches a request: the template and every accepted method."""

    __slots__ = ("methods", "template")

    def __init__(self, template: str | None, methods: frozenset[str] | None) -> None:
        self.template = template
        # None when a matching route accepts methods we cannot list (a mounted app).
        self.methods = methods

    def allow_header(self) -> str:
        """The methods for `Allow`, OPTIONS included (the methods middleware answers it)."""
        methods = (self.methods or frozenset()) | {"OPTIONS"}
        return ", ".join(m for m in METHODS if m in methods)


def app_path(scope: Scope) -> str:
    """The request path inside the app (without the root path a proxy mounts it under)."""
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", ""))
    if root and path.startswith(root):
        path = path[len(root) :] or "/"
    return path


class RouteTable:
    """The routes of `app`, read on first use (all routes are added by then)."""

    def __init__(self, app: _HasRoutes) -> None:
        self._app = app
        self._routes: list[tuple[re.Pattern[str], str, frozenset[str] | None]] | None = None

    def _entries(self) -> list[tuple[re.Pattern[str], str, frozenset[str] | None]]:
        if self._routes is None:
            from fastapi.routing import iter_route_contexts

            routes = []
            for context in iter_route_contexts(self._app.routes):
                # The compiled path of the route as included (prefix and all); a mount's
                # matches its whole subtree. Its methods: None for a mount (its own app).
                template = getattr(context, "path_format", None)
                regex = getattr(context, "path_regex", None)
                if isinstance(template, str) and isinstance(regex, re.Pattern):
                    methods = getattr(context, "methods", None)
                    routes.append((regex, template, frozenset(methods) if methods else None))
            self._routes = routes
        return self._routes

    def match(self, scope: Scope) -> RouteMatch:
        """The template Starlette would route `scope` to, and the methods of its path.

        The template is that of the first route matching path and method, else of the
        first matching the path alone, else None (no such path).
        """
        path = app_path(scope)
        method = scope.get("method", "GET")
        full = partial = None
        methods: set[str] | None = set()
        for regex, template, accepted in self._entries():
            if not regex.match(path):
                continue
            if full is None and (accepted is None or method in accepted):
                full = template
            partial = partial or template
            if accepted is None:
                methods = None
            elif methods is not None:
                methods |= accepted
        return RouteMatch(full or partial, frozenset(methods) if methods is not None else None)
