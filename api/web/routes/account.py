"""Account pages: sign in (username and password, or an API token), sign out, and one's API
tokens (create with an optional expiry, shown once; when each expires and was last used; revoke)."""

from __future__ import annotations

import datetime as dt

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from kernelrank.api.deps import SessionDep, SettingsDep
from kernelrank.api.edge import Id
from kernelrank.api.web.deps import COOKIE, PageUser, check_csrf, check_origin, render
from kernelrank.api.web.signin import clear_session_cookie, safe_next, set_session_cookie, signin_redirect
from kernelrank.services import users

router = APIRouter(include_in_schema=False)


@router.get("/signin", response_class=HTMLResponse)
def signin_page(request: Request, user: PageUser, next: str = "/"):
    """The sign-in form: a username and password, or an API token."""
    return render(request, "signin.html", user, next=safe_next(next), error=None)


@router.post("/signin")
def signin(request: Request, session: SessionDep, settings: SettingsDep, username: str = Form(""), password: str = Form(""),
           token: str = Form(""), next: str = Form("/")):
    """Start a web session for a right username and password, or a valid API token; answer the
    form again with 401 otherwise (the same message for an unknown name and a wrong password).

    Raises:
        Forbidden: a cross-site ``Origin``.
    """
    check_origin(request)
    user = None
    if token.strip():
        user = users.authenticate(session, token.strip())
        error = "that API token is not valid (revoked, expired, or mistyped)"
    else:
        user = users.authenticate_password(session, username.strip(), password) if username.strip() else None
        error = "wrong username or password"
    if user is None:
        return render(request, "signin.html", None, status_code=401, next=safe_next(next), error=error,
                      username=username)
    users.end_web_session(session, request.cookies.get(COOKIE))  # a browser holds one session at a time
    raw = users.start_web_session(session, user, settings.session_max_age_seconds)
    response = RedirectResponse(safe_next(next), status_code=303)
    set_session_cookie(response, request, raw, settings.session_max_age_seconds)
    return response


@router.post("/signout")
def signout(request: Request, session: SessionDep, csrf: str = Form("")):
    """End this browser's web session."""
    check_csrf(request, csrf)
    users.end_web_session(session, request.cookies.get(COOKIE))
    response = RedirectResponse("/", status_code=303)
    clear_session_cookie(response)
    return response


@router.get("/me/tokens", response_class=HTMLResponse)
def tokens_page(request: Request, session: SessionDep, user: PageUser):
    """The signed-in user's API tokens (name, prefix, dates; never the token itself)."""
    if user is None:
        return signin_redirect("/me/tokens")
    return render(request, "tokens.html", user, tokens=_rows(session, user), new_token=None,
                  expiry_choices=EXPIRY_CHOICES)


#: The tokens form's expiry choices: (days, label); 0 is "never".
EXPIRY_CHOICES = ((0, "never"), (7, "in 7 days"), (30, "in 30 days"), (90, "in 90 days"), (365, "in a year"))


def _rows(session, user) -> list[dict]:
    return [{"token": t, "state": users.token_state(t)} for t in users.list_tokens(session, user)]


@router.post("/me/tokens", response_class=HTMLResponse)
def create_token(request: Request, session: SessionDep, user: PageUser, csrf: str = Form(""), name: str = Form(""),
                 expires_days: int = Form(0, ge=0, le=3650)):
    """Create a named API token, expiring in ``expires_days`` days (0: never), and show it this once."""
    from kernelrank.db.models import utcnow

    if user is None:
        return signin_redirect("/me/tokens")
    check_csrf(request, csrf)
    expires_at = utcnow() + dt.timedelta(days=expires_days) if expires_days else None
    row, raw = users.create_token(session, user, name, expires_at=expires_at)
    response = render(request, "tokens.html", user, status_code=201, tokens=_rows(session, user),
                      new_token=raw, new_name=row.name, expiry_choices=EXPIRY_CHOICES)
    response.headers["Cache-Control"] = "no-store"
    return response


@router.post("/me/tokens/{token_id}/revoke")
def revoke_token(token_id: Id, request: Request, session: SessionDep, user: PageUser, csrf: str = Form("")):
    """Revoke one of the signed-in user's API tokens."""
    if user is None:
        return signin_redirect("/me/tokens")
    check_csrf(request, csrf)
    users.revoke_token(session, user, token_id)
    return RedirectResponse("/me/tokens", status_code=303)
