"""What every page route needs: the templates, the signed-in browser's user, and CSRF checks.

Signed-in browsers carry the session cookie :data:`COOKIE` (HttpOnly, ``SameSite=Lax``, ``Secure``
when the request came over HTTPS); what it holds and how it maps to a user is the account
service's business (server-side web sessions in :mod:`kernelrank.services.users`).

CSRF: every form a signed-in user can post carries the session's CSRF token
(:func:`kernelrank.services.users.csrf_token`, an HMAC keyed by the raw session token). A
cross-site page can read neither the cookie nor the token, so it cannot forge the field; the
check is :func:`check_csrf` and runs before any form is acted upon. As a second line, a
state-changing request whose ``Origin`` header names another site is refused, and the cookie is
``SameSite=Lax`` so other sites' posts do not carry it at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Request
from fastapi.templating import Jinja2Templates

from kernelrank.api.deps import SessionDep, release
from kernelrank.api.web import format as fmt
from kernelrank.api.web.markdown import render_markdown
from kernelrank.db.models import User
from kernelrank.services import Forbidden, users

HERE = Path(__file__).resolve().parent
COOKIE = "kr_session"

templates = Jinja2Templates(directory=HERE / "templates")  # autoescape is on for .html
templates.env.filters.update(fmt.FILTERS)
templates.env.filters["markdown"] = render_markdown


def csrf_token(request: Request) -> str:
    """The CSRF token of the request's session cookie (empty when signed out)."""
    value = request.cookies.get(COOKIE, "")
    return users.csrf_token(value) if value else ""


def check_origin(request: Request) -> None:
    """Refuse a request whose ``Origin`` (sent by browsers on cross-site posts) names another host.
    Only the host and port are compared: behind a proxy that ends TLS the app sees ``http`` while
    the browser's origin says ``https``.

    Raises:
        Forbidden: the Origin header names a different host or port.
    """
    origin = request.headers.get("origin")
    if not origin:
        return
    if urlsplit(origin).netloc != request.url.netloc:
        raise Forbidden("cross-site form posts are refused")


def check_csrf(request: Request, token: str) -> None:
    """Refuse a form post whose CSRF token does not match the session cookie.

    Raises:
        Forbidden: a missing or wrong token, or a cross-site ``Origin``.
    """
    check_origin(request)
    if not users.check_csrf(request.cookies.get(COOKIE), token):
        raise Forbidden("the form's CSRF token is missing or stale: reload the page and try again")


def get_page_user(request: Request, session: SessionDep) -> User | None:
    """The signed-in user of this browser, or ``None`` (the session's connection goes back to the
    pool before a form is read: :func:`kernelrank.api.deps.release`)."""
    user = users.web_session_user(session, request.cookies.get(COOKIE))
    release(session)
    return user


PageUser = Annotated[User | None, Depends(get_page_user)]


def render(request: Request, name: str, user: User | None, status_code: int = 200, **context):
    """A page from ``templates/<name>`` with the signed-in user and the CSRF token in context."""
    return templates.TemplateResponse(request, name, {"user": user, "csrf": csrf_token(request), **context},
                                      status_code=status_code)
