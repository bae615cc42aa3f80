"""``/api/v1/me``, ``/api/v1/users`` and ``/api/v1/auth``: the caller, its API tokens and password,
accounts (admins create them and may set their passwords), and password sign-in for a token."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response, status

from kernelrank.api.deps import AdminUser, CurrentUser, SessionDep
from kernelrank.api.edge import Id
from kernelrank.api.presenters import me_public, token_public
from kernelrank.api.schemas import (
    Me,
    PasswordChange,
    PasswordLogin,
    PasswordSet,
    TokenCreate,
    TokenCreated,
    TokenPublic,
    UserCreate,
    UserCreated,
)
from kernelrank.services import users

router = APIRouter(prefix="/api/v1", tags=["users"])

_NO_TOKEN = {401: {"description": "No valid token"}}


@router.get("/me", response_model=Me, summary="The caller", responses=_NO_TOKEN)
def me(user: CurrentUser) -> Me:
    return me_public(user)


@router.post("/users", response_model=UserCreated, status_code=status.HTTP_201_CREATED, summary="Create a user",
             responses={**_NO_TOKEN, 403: {"description": "Not an admin"},
                        409: {"description": "The name is taken"}, 422: {"description": "Invalid name"}})
def create_user(body: UserCreate, _admin: AdminUser, session: SessionDep) -> UserCreated:
    """Create a user and its first API token (admins only). The token is shown in this answer only."""
    user, token = users.create_user(session, body.name, admin=body.admin)
    return UserCreated(name=user.name, is_admin=user.is_admin, token=token)


@router.get("/users/me/tokens", response_model=list[TokenPublic], summary="My API tokens", responses=_NO_TOKEN)
def list_tokens(user: CurrentUser, session: SessionDep) -> list[TokenPublic]:
    """The caller's API tokens, newest first, revoked ones included (never the tokens themselves)."""
    return [token_public(t) for t in users.list_tokens(session, user)]


@router.post("/users/me/tokens", response_model=TokenCreated, status_code=status.HTTP_201_CREATED,
             summary="Create an API token",
             responses={**_NO_TOKEN, 422: {"description": "A name over 64 characters, or an expiry not in the future"}})
def create_token(body: TokenCreate, user: CurrentUser, session: SessionDep) -> TokenCreated:
    """A new named API token for the caller, shown in this answer only; with ``expires_at``, it is
    refused (401) from then on."""
    token, raw = users.create_token(session, user, body.name, expires_at=body.expires_at)
    return TokenCreated(**token_public(token).model_dump(), token=raw)


@router.delete("/users/me/tokens/{token_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Revoke an API token",
               responses={**_NO_TOKEN, 404: {"description": "Not one of the caller's tokens"}})
def revoke_token(token_id: Id, user: CurrentUser, session: SessionDep) -> Response:
    """Revoke one of the caller's tokens (at once: later requests with it get 401). Revoking the
    token this request was made with is allowed."""
    users.revoke_token(session, user, token_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.put("/users/me/password", status_code=status.HTTP_204_NO_CONTENT, summary="Set my password",
            responses={**_NO_TOKEN, 403: {"description": "Wrong current password"},
                       422: {"description": "Too short or too long"}})
def change_password(body: PasswordChange, user: CurrentUser, session: SessionDep) -> Response:
    """Set or change the caller's password (``current`` is required once one is set). The
    password is stored as an Argon2id hash; it signs in on the web pages and at ``/auth/token``."""
    users.change_password(session, user, body.current, body.new)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.put("/users/{name}/password", status_code=status.HTTP_204_NO_CONTENT, summary="Set a user's password",
            responses={**_NO_TOKEN, 403: {"description": "Not an admin"}, 404: {"description": "No such user"},
                       422: {"description": "Too short or too long"}})
def set_password(name: str, body: PasswordSet, _admin: AdminUser, session: SessionDep) -> Response:
    """Set user NAME's password (admins only)."""
    users.set_password(session, users.get_user(session, name), body.password)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/auth/token", response_model=TokenCreated, status_code=status.HTTP_201_CREATED,
             summary="Sign in with a password", tags=["auth"],
             responses={401: {"description": "Wrong user name or password"}})
def password_sign_in(body: PasswordLogin, session: SessionDep) -> TokenCreated:
    """Exchange a user name and password for a new API token (shown in this answer only)."""
    user = users.authenticate_password(session, body.name, body.password)
    if user is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "wrong user name or password")
    token, raw = users.create_token(session, user, body.token_name)
    return TokenCreated(**token_public(token).model_dump(), token=raw)
