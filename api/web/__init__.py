"""The leaderboard's web pages: server-rendered HTML (Jinja2 through FastAPI, autoescaped) over the
same service functions as the JSON API, with static CSS and one small polling script.

:func:`install` adds them to an app: the page routers, ``/static``, and error pages in HTML for
page requests (the JSON API keeps its ``{"detail": ...}`` answers).
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response

from kernelrank.services import ServiceError

#: Paths that are not pages: their errors stay JSON.
_NOT_PAGES = ("/api/", "/docs", "/openapi.json", "/healthz", "/static/")

#: Headers of every page: scripts, styles and images from this site only (no inline script), no
#: framing (clickjacking of the admin forms), forms posting to this site only.
PAGE_HEADERS = {
    "Content-Security-Policy": ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                                "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}

_TITLES = {401: "Sign-in needed", 403: "Not allowed", 404: "Not found", 409: "Conflict", 413: "Too large",
           422: "Cannot do that"}


def install(app: FastAPI) -> None:
    """Add the pages to ``app``. Call after the app's own exception handlers are registered: page
    requests get an HTML error page, other requests go to the app's handler."""
    from kernelrank.api.web.deps import HERE
    from kernelrank.api.web.routes import account, admin, competitions, public, submissions

    for router in (public.router, submissions.router, account.router, admin.router, competitions.router):
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    json_handler = app.exception_handlers.get(ServiceError)

    async def _service_error(request: Request, exc: ServiceError) -> Response:
        if request.url.path.startswith(_NOT_PAGES) and json_handler is not None:
            return await json_handler(request, exc)
        return error_page(request, exc.status_code, exc.message)

    app.add_exception_handler(ServiceError, _service_error)

    @app.middleware("http")
    async def _page_headers(request: Request, call_next):
        response = await call_next(request)
        if not request.url.path.startswith(_NOT_PAGES):
            for name, value in PAGE_HEADERS.items():
                response.headers.setdefault(name, value)
        return response


def error_page(request: Request, status_code: int, message: str) -> Response:
    """An HTML error page (the message is escaped like any other text)."""
    from kernelrank.api.web.deps import render

    return render(request, "error.html", None, status_code=status_code, title=_TITLES.get(status_code, "Error"),
                  message=message)
