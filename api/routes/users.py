"""``/api/v1/me`` and ``/api/v1/users``: the caller, and accounts (admins create them)."""

from __future__ import annotations

from fastapi import APIRouter, status

from kernelrank.api.deps import AdminUser, CurrentUser, SessionDep
from kernelrank.api.schemas import Me, UserCreate, UserCreated
from kernelrank.services import users

router = APIRouter(prefix="/api/v1", tags=["users"])


@router.get("/me", response_model=Me, summary="The caller", responses={401: {"description": "No valid token"}})
def me(user: CurrentUser) -> Me:
    return Me(name=user.name, is_admin=user.is_admin)


@router.post("/users", response_model=UserCreated, status_code=status.HTTP_201_CREATED, summary="Create a user",
             responses={401: {"description": "No valid token"}, 403: {"description": "Not an admin"},
                        409: {"description": "The name is taken"}, 422: {"description": "Invalid name"}})
def create_user(body: UserCreate, _admin: AdminUser, session: SessionDep) -> UserCreated:
    """Create a user and its first API token (admins only). The token is shown in this answer only."""
    user, token = users.create_user(session, body.name, admin=body.admin)
    return UserCreated(name=user.name, is_admin=user.is_admin, token=token)
