"""Users and API tokens. Tokens are 256-bit random strings shown once; only their SHA-256 is kept
(a slow hash is for low-entropy passwords; a random token needs only a preimage-resistant one)."""

from __future__ import annotations

import hashlib
import re
import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelrank.db.models import ApiToken, User, utcnow
from kernelrank.services import Conflict, Invalid, NotFound

TOKEN_PREFIX = "kr_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def hash_token(raw: str) -> str:
    """SHA-256 hex of a raw token."""
    return hashlib.sha256(raw.encode()).hexdigest()


def create_user(session: Session, name: str, admin: bool = False) -> tuple[User, str]:
    """Create a user and a first API token; returns ``(user, raw_token)``.

    Raises:
        Invalid: a name that is not 1-64 letters, digits, ``_ . -``.
        Conflict: the name is taken.
    """
    if not _NAME.match(name):
        raise Invalid("user names are 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit")
    if session.scalar(select(User).where(User.name == name)) is not None:
        raise Conflict(f"user {name!r} exists")
    user = User(name=name, is_admin=admin)
    session.add(user)
    session.flush()
    return user, issue_token(session, user, "default")


def issue_token(session: Session, user: User, name: str = "") -> str:
    """A new API token for ``user``; the raw value is returned once and never stored."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(ApiToken(user_id=user.id, token_hash=hash_token(raw), prefix=raw[:10], name=name[:64]))
    session.flush()
    return raw


def authenticate(session: Session, raw: str) -> User | None:
    """The user owning an unrevoked token, or ``None``."""
    token = session.scalar(select(ApiToken).where(ApiToken.token_hash == hash_token(raw), ApiToken.revoked_at.is_(None)))
    return token.user if token is not None else None


def revoke_token(session: Session, user: User, token_id: int) -> None:
    """Revoke one of ``user``'s tokens.

    Raises:
        NotFound: no such token of this user.
    """
    token = session.get(ApiToken, token_id)
    if token is None or token.user_id != user.id:
        raise NotFound("no such token")
    token.revoked_at = utcnow()


def get_user(session: Session, name: str) -> User:
    """Raises: NotFound."""
    user = session.scalar(select(User).where(User.name == name))
    if user is None:
        raise NotFound(f"no user {name!r}")
    return user


def any_admin(session: Session) -> bool:
    """Whether an admin exists (the first ``serve`` creates one when not)."""
    return session.scalar(select(User.id).where(User.is_admin.is_(True)).limit(1)) is not None
