"""The API's documentation: offline Swagger UI and ReDoc, and the OpenAPI schema's error answers.

`add_docs(app)` mounts the pages and their assets; `openapi_with_errors(app)` builds (once)
the generated schema plus the error answers every operation may give, which `app.openapi`
returns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request

from app.http_guards import docs_csp

__all__ = ["DOCS_ASSETS", "add_docs", "openapi_with_errors"]

DOCS_ASSETS = "/docs/assets"


def add_docs(app: FastAPI) -> None:
    """Swagger UI at /docs and ReDoc at /redoc from files shipped with the service.

    FastAPI's defaults load them from a CDN, and a hospital network often has no
    internet access. The files come from the pinned `fastapi-offline` package
    (Swagger UI 5, Apache-2.0; ReDoc, MIT).
    """
    from importlib.resources import files

    from fastapi.openapi.docs import (
        get_redoc_html,
        get_swagger_ui_html,
        get_swagger_ui_oauth2_redirect_html,
    )
    from fastapi.responses import HTMLResponse
    from fastapi.staticfiles import StaticFiles

    assets = Path(str(files("fastapi_offline") / "static"))
    app.mount(DOCS_ASSETS, StaticFiles(directory=assets), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _with_csp(
            get_swagger_ui_html(
                openapi_url=f"{root}{app.openapi_url}",
                title=f"{app.title} - Swagger UI",
                oauth2_redirect_url=f"{root}/docs/oauth2-redirect",
                swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
                swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
                swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
            )
        )

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return _with_csp(get_swagger_ui_oauth2_redirect_html())

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _with_csp(
            get_redoc_html(
                openapi_url=f"{root}{app.openapi_url}",
                title=f"{app.title} - ReDoc",
                redoc_js_url=f"{root}{DOCS_ASSETS}/redoc.standalone.js",
                redoc_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
                with_google_fonts=False,
            )
        )

    def _with_csp(page: HTMLResponse) -> HTMLResponse:
        # Same origin as the page that keeps the API key: no framing, only its own scripts.
        page.headers["Content-Security-Policy"] = docs_csp(bytes(page.body).decode("utf-8"))
        return page


# Error answers every operation may give besides its own (issue 7 item 9: 400 and 415
# were returned but undocumented). Each is the ErrorRead JSON body.
_KEY_ERRORS = {
    "401": "Missing or empty X-API-Key header (when API keys are configured).",
    "403": "X-API-Key is not one of the configured keys, or a cross-site request (its Origin "
    "or Sec-Fetch-Site shows a page of another site sent it).",
}
_BODY_ERRORS = {
    "400": "Malformed body: invalid JSON, invalid UTF-8 (the message names the byte "
    "offset) or broken multipart data.",
    "413": "Request body over CXR_MAX_JSON_MB (JSON), CXR_MAX_UPLOAD_MB (an image) or "
    "CXR_MAX_BATCH_UPLOAD_MB (a batch zip).",
    "415": "A Content-Type (or file type) this operation does not accept.",
    "422": "The body is well-formed but invalid; `detail` says which field and why.",
}


def openapi_with_errors(app: FastAPI) -> dict[str, Any]:
    """The generated schema plus the error responses the middleware and handlers give."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    from fastapi.openapi.utils import get_openapi

    from app.schemas import ErrorRead

    schema = get_openapi(
        title=app.title,
        version=app.version,
        summary=app.summary,
        description=app.description,
        routes=app.routes,
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    _hoist_defs(schema, components)
    components.setdefault(
        "ErrorRead", ErrorRead.model_json_schema(ref_template="#/components/schemas/{model}")
    )
    error_body = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorRead"}}}
    for path, item in schema.get("paths", {}).items():
        for method, operation in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            extra = dict(_KEY_ERRORS) if path.startswith("/v1/") else {}
            if "requestBody" in operation:
                extra.update(_BODY_ERRORS)
            responses = operation.setdefault("responses", {})
            for code, description in extra.items():
                responses.setdefault(code, {"description": description, "content": error_body})
    app.openapi_schema = schema
    return schema


def _hoist_defs(node: Any, components: dict[str, Any]) -> None:
    """Move pydantic's nested `$defs` into components and point their `$ref`s there.

    A model schema given as `openapi_extra` keeps `#/$defs/X` references, which resolve
    against the document root and so nowhere (issue 18 item 17).
    """
    if isinstance(node, dict):
        for name, definition in node.pop("$defs", {}).items():
            _hoist_defs(definition, components)
            components.setdefault(name, definition)
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            node["$ref"] = "#/components/schemas/" + ref.removeprefix("#/$defs/")
        for value in list(node.values()):  # components may grow meanwhile
            _hoist_defs(value, components)
    elif isinstance(node, list):
        for item in node:
            _hoist_defs(item, components)
