"""Signing a browser in and out: the session cookie and the redirects around it."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from fastapi import Request
from fastapi.responses import RedirectResponse

from kernelrank.api.web.deps import COOKIE

def safe_next(target: str | None) -> str:
    """A same-site path to go to after sign-in: ``target`` when it is a local path, else ``/``
    (no open redirect to another site, nor ``//host`` or ``/\\host`` tricks)."""
    if not target:
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    return target


def signin_redirect(next_path: str) -> RedirectResponse:
    """To the sign-in page, coming back to ``next_path`` afterwards."""
    return RedirectResponse(f"/signin?next={quote(safe_next(next_path))}", status_code=303)


def set_session_cookie(response: RedirectResponse, request: Request, raw: str, max_age_s: int) -> None:
    """Put a new session's raw token in the HttpOnly, ``SameSite=Lax`` cookie (``Secure`` over
    HTTPS) that lasts as long as the session (``max_age_s`` seconds)."""
    response.set_cookie(COOKIE, raw, max_age=max_age_s, httponly=True, samesite="lax",
                        secure=request.url.scheme == "https", path="/")


def clear_session_cookie(response: RedirectResponse) -> None:
    response.delete_cookie(COOKIE, path="/")
