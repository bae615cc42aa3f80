"""The OpenAPI document, completed with every status a route can answer besides its own.

Routes declare what is theirs (404 for an unknown problem, 409, 429...). What every route shares
is derived here from what it depends on, so it cannot be forgotten on a new route:

- a body (declared, or read by a parsing dependency): 400 (a body that cannot be parsed, e.g. a
  broken multipart form), 408 (not sent within the body deadline), 422;
- any request: 413 (a body over the route's limit; :mod:`kernelrank.api.edge`);
- parameters: 422 (validation errors: ``HTTPValidationError``, or a service's ``{"detail": str}``);
- ``CurrentUser``: 401; ``OptionalUser``: 401 for a token that is not valid; ``AdminUser``: 403;
- the database session: 503 (the database is unavailable).

Every error answer but 422's list is ``{"detail": str}`` (schema ``ErrorDetail``). CI checks the
document against the live app (``tests/api/test_schema_fuzz.py``: schemathesis).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

ERROR_DETAIL = {"title": "ErrorDetail", "type": "object", "required": ["detail"],
                "properties": {"detail": {"type": "string", "title": "Detail"}}}
_REF = {"$ref": "#/components/schemas/ErrorDetail"}

_DESCRIPTIONS = {
    400: "A body that cannot be parsed (e.g. a malformed multipart form)",
    401: "No valid API token",
    403: "Not allowed (not an admin)",
    404: "Not found",
    408: "The body did not arrive within settings.http_body_timeout_seconds",
    413: "A request body over the route's limit",
    422: "Invalid parameters or body",
    503: "The database is unavailable",
}


def _dependency_calls(route: Any) -> set[Any]:
    calls, stack = set(), [route.dependant]
    while stack:
        dep = stack.pop()
        calls.add(dep.call)
        stack.extend(dep.dependencies)
    return calls


def shared_statuses(route: Any, operation: dict[str, Any]) -> set[int]:
    """The statuses ``route`` can answer besides its own (see the module's docstring)."""
    from kernelrank.api import deps

    calls = _dependency_calls(route)
    out = {413}
    has_body = route.body_field is not None or "requestBody" in operation
    if has_body:
        out |= {400, 408, 422}
    if operation.get("parameters"):
        out.add(422)
    if any("{" in part for part in route.path_format.split("/")):
        out.add(404)  # a path parameter no route or row matches
    if deps.get_current_user in calls or deps.get_optional_user in calls:
        out.add(401)
    if deps.get_admin_user in calls:
        out.add(403)
    if deps.get_session in calls:
        out.add(503)
    return out


def complete(app: FastAPI, schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (FastAPI's document of ``app``) with the shared statuses added to each operation
    and ``ErrorDetail`` as the body of every error answer that has none."""
    from fastapi.routing import APIRoute, iter_route_contexts

    schema.setdefault("components", {}).setdefault("schemas", {})["ErrorDetail"] = ERROR_DETAIL
    validation = schema["components"]["schemas"].get("HTTPValidationError")
    for route in iter_route_contexts(app.routes):
        if not isinstance(route.original_route, APIRoute) or not route.include_in_schema:
            continue
        for method in route.methods:
            operation = schema["paths"].get(route.path_format, {}).get(method.lower())
            if operation is None:
                continue
            responses = operation.setdefault("responses", {})
            for code in shared_statuses(route.original_route, operation):
                responses.setdefault(str(code), {"description": _DESCRIPTIONS[code]})
            for code, response in responses.items():
                if not code.isdigit() or int(code) < 400:
                    continue
                content = response.setdefault("content", {}).setdefault("application/json", {})
                if code == "422" and validation is not None:
                    content["schema"] = {"anyOf": [{"$ref": "#/components/schemas/HTTPValidationError"}, _REF]}
                elif not content.get("schema"):
                    content["schema"] = _REF
    return schema


def install(app: FastAPI) -> None:
    """Serve the completed document at ``app.openapi_url`` (built once, on first request)."""
    base = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = complete(app, base())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
