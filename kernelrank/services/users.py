"""Users, passwords, API tokens and web sign-in sessions.

Tokens (API and web session) are 256-bit random strings shown once; only their SHA-256 is kept (a
slow hash is for low-entropy passwords; a random token needs only a preimage-resistant one).
Passwords are hashed with Argon2id (``argon2-cffi``'s :class:`~argon2.PasswordHasher`, its default
RFC 9106 low-memory profile: 3 passes over 64 MiB), salted per user.

User names are 1-64 letters, digits, ``_ . -`` (after Unicode NFKC normalisation), matched whole
(no trailing newline), and unique regardless of case: ``users.name_folded`` holds the NFKC
case-folded name under a unique index, and every look-up by name goes through it.

API tokens may carry an expiry (``expires_at``; refused from then on, like a revoked one) and
record the last time they authenticated a request (``last_used_at``, written at most once per
:data:`LAST_USED_RESOLUTION`, so reads do not turn into a write each).

Web sessions are server-side rows: the browser's cookie holds the raw session token, so signing
out (or an admin deleting the user) ends the session at once and no signing secret is needed.
The CSRF token of a session is derived from its raw token (:func:`csrf_token`), so a page can put
it in its forms and the server can check it without storing it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
import secrets
import unicodedata
from functools import lru_cache
from typing import TYPE_CHECKING

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from kernelrank.db.models import ApiToken, User, WebSession, fold_name, utcnow
from kernelrank.services import Conflict, Forbidden, Invalid, NotFound

if TYPE_CHECKING:
    from argon2 import PasswordHasher

TOKEN_PREFIX = "kr_"
#: Prefix of web session tokens (the cookie value), so one is never mistaken for an API token.
SESSION_PREFIX = "krs_"
PASSWORD_MIN_CHARS = 8
#: Longer passwords are refused (hashing cost grows with the input; nobody types more).
PASSWORD_MAX_CHARS = 1024
#: A user name, matched whole (``fullmatch``: ``$`` would let a trailing newline through).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: ``last_used_at`` is rewritten only when older than this.
LAST_USED_RESOLUTION = dt.timedelta(minutes=1)


def normalize_name(name: str) -> str:
    """``name`` in Unicode NFKC (fullwidth ``ａｌｉｃｅ`` is ``alice``), as it is stored."""
    return unicodedata.normalize("NFKC", name)


def valid_name(name: str) -> bool:
    """Whether ``name`` (normalised) is a user name: 1-64 letters, digits, ``_ . -``, starting with a
    letter or digit, and nothing else (no trailing newline)."""
    return _NAME.fullmatch(name) is not None


def find_user(session: Session, name: str) -> User | None:
    """The user whose name is ``name`` regardless of case and Unicode form, or ``None``."""
    if len(name) > 256:
        return None
    return session.scalar(select(User).where(User.name_folded == fold_name(name)))


def hash_token(raw: str) -> str:
    """SHA-256 hex of a raw token."""
    return hashlib.sha256(raw.encode()).hexdigest()


def create_user(session: Session, name: str, admin: bool = False) -> tuple[User, str]:
    """Create a user and a first API token; returns ``(user, raw_token)``.

    The name is stored in Unicode NFKC (:func:`normalize_name`).

    Raises:
        Invalid: a name that is not 1-64 letters, digits, ``_ . -`` (after normalisation).
        Conflict: the name is taken, in any case (``Alice`` when ``alice`` exists).
    """
    name = normalize_name(name)
    if not valid_name(name):
        raise Invalid("user names are 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit")
    existing = find_user(session, name)
    if existing is not None:
        raise Conflict(f"user {name!r} exists" if existing.name == name else
                       f"user {name!r} exists as {existing.name!r} (names are unique regardless of case)")
    user = User(name=name, name_folded=fold_name(name), is_admin=admin)
    session.add(user)
    session.flush()
    return user, issue_token(session, user, "default")


def issue_token(session: Session, user: User, name: str = "") -> str:
    """A new API token for ``user``; the raw value is returned once and never stored."""
    return create_token(session, user, name)[1]


def create_token(session: Session, user: User, name: str = "",
                 expires_at: dt.datetime | None = None) -> tuple[ApiToken, str]:
    """A new named API token for ``user``: ``(row, raw_token)``; the raw value is returned once and
    never stored (the row keeps its SHA-256 and its first 10 characters as ``prefix``).

    Args:
        expires_at: when it stops working (a naive time is read as UTC); ``None``: never.

    Raises:
        Invalid: a name over 64 characters, or an expiry that is not in the future.
    """
    name = name.strip()
    if len(name) > 64:
        raise Invalid("token names are at most 64 characters")
    if expires_at is not None:
        expires_at = _aware(expires_at)
        if expires_at <= utcnow():
            raise Invalid("a token's expiry must be in the future")
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(user_id=user.id, token_hash=hash_token(raw), prefix=raw[:10], name=name, expires_at=expires_at)
    session.add(token)
    session.flush()
    return token, raw


def list_tokens(session: Session, user: User, include_revoked: bool = True) -> list[ApiToken]:
    """``user``'s API tokens, newest first (hashes stay in the rows: show ``name``, ``prefix``,
    ``created_at``, ``expires_at``, ``last_used_at``, ``revoked_at`` only)."""
    q = select(ApiToken).where(ApiToken.user_id == user.id)
    if not include_revoked:
        q = q.where(ApiToken.revoked_at.is_(None))
    return list(session.scalars(q.order_by(ApiToken.created_at.desc(), ApiToken.id.desc())))


def token_state(token: ApiToken, now: dt.datetime | None = None) -> str:
    """``active``, ``revoked`` or ``expired``."""
    if token.revoked_at is not None:
        return "revoked"
    if token.expires_at is not None and _aware(token.expires_at) <= (now or utcnow()):
        return "expired"
    return "active"


def find_token(session: Session, raw: str) -> ApiToken | None:
    """The token row of a raw token (any state), or ``None``."""
    if len(raw) > 256:
        return None
    return session.scalar(select(ApiToken).where(ApiToken.token_hash == hash_token(raw)))


def authenticate(session: Session, raw: str) -> User | None:
    """The user owning a token that is neither revoked nor expired, or ``None``. Records the use
    (``last_used_at``, when it is older than :data:`LAST_USED_RESOLUTION`)."""
    token = find_token(session, raw)
    now = utcnow()
    if token is None or token_state(token, now) != "active":
        return None
    if token.last_used_at is None or _aware(token.last_used_at) <= now - LAST_USED_RESOLUTION:
        token.last_used_at = now
    return token.user


def revoke_token(session: Session, user: User, token_id: int) -> None:
    """Revoke one of ``user``'s tokens.

    Raises:
        NotFound: no such token of this user.
    """
    token = session.get(ApiToken, token_id)
    if token is None or token.user_id != user.id:
        raise NotFound("no such token")
    if token.revoked_at is None:
        token.revoked_at = utcnow()


def get_user(session: Session, name: str) -> User:
    """The user named ``name`` (regardless of case and Unicode form).

    Raises: NotFound."""
    user = find_user(session, name)
    if user is None:
        raise NotFound(f"no user {name!r}")
    return user


def any_admin(session: Session) -> bool:
    """Whether an admin exists (the first ``serve`` creates one when not)."""
    return session.scalar(select(User.id).where(User.is_admin.is_(True)).limit(1)) is not None


# -- passwords ------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _hasher() -> "PasswordHasher":
    from argon2 import PasswordHasher

    return PasswordHasher()  # Argon2id, RFC 9106 low-memory profile


@lru_cache(maxsize=1)
def _dummy_hash() -> str:
    """A hash no password matches, verified when the user is unknown or has no password, so a
    sign-in takes as long whether or not the name exists."""
    return _hasher().hash(secrets.token_urlsafe(32))


def set_password(session: Session, user: User, password: str) -> None:
    """Set (or replace) ``user``'s password, stored as an Argon2id hash. Every browser signed in
    as ``user`` is signed out (API tokens stay valid: revoke them separately).

    Raises:
        Invalid: fewer than :data:`PASSWORD_MIN_CHARS` or more than :data:`PASSWORD_MAX_CHARS`
            characters.
    """
    if len(password) < PASSWORD_MIN_CHARS:
        raise Invalid(f"passwords are at least {PASSWORD_MIN_CHARS} characters")
    if len(password) > PASSWORD_MAX_CHARS:
        raise Invalid(f"passwords are at most {PASSWORD_MAX_CHARS} characters")
    user.password_hash = _hasher().hash(password)
    _end_all_web_sessions(session, user)
    session.flush()


def _end_all_web_sessions(session: Session, user: User) -> None:
    session.execute(update(WebSession).where(WebSession.user_id == user.id, WebSession.revoked_at.is_(None))
                    .values(revoked_at=utcnow()))


def change_password(session: Session, user: User, current: str | None, new: str) -> None:
    """Self-service change: ``current`` must be the user's password when one is set.

    Raises:
        Forbidden: ``current`` is wrong (or missing while a password is set).
        Invalid: the new password's length (see :func:`set_password`).
    """
    if user.password_hash is not None and not check_password(user, current or ""):
        raise Forbidden("the current password is wrong")
    set_password(session, user, new)


def clear_password(session: Session, user: User) -> None:
    """Remove ``user``'s password: sign-in by API token only; signs out every browser of ``user``."""
    user.password_hash = None
    _end_all_web_sessions(session, user)
    session.flush()


def check_password(user: User, password: str) -> bool:
    """Whether ``password`` is ``user``'s (``False`` when the user has none)."""
    from argon2.exceptions import InvalidHashError, VerificationError

    stored = user.password_hash
    dummy = _dummy_hash()  # made on the first sign-in of any kind, so that one is not told apart either
    try:
        return _hasher().verify(stored or dummy, password) and stored is not None
    except (VerificationError, InvalidHashError):
        return False


def authenticate_password(session: Session, name: str, password: str) -> User | None:
    """The user ``name`` when ``password`` is theirs, else ``None``.

    An unknown name, a user without a password and a wrong password all cost one Argon2
    verification (no user enumeration by timing beyond the library's own). A hash made with older
    parameters is upgraded on success.
    """
    if len(password) > PASSWORD_MAX_CHARS:
        return None
    user = find_user(session, name) if len(name) <= 64 else None
    if user is None:
        check_password(User(name="", password_hash=None), password)
        return None
    if not check_password(user, password):
        return None
    if user.password_hash is not None and _hasher().check_needs_rehash(user.password_hash):
        user.password_hash = _hasher().hash(password)
    return user


# -- web sessions ---------------------------------------------------------------------------------
def start_web_session(session: Session, user: User, max_age_s: float) -> str:
    """Sign ``user`` in for a browser: returns the raw session token for the cookie (shown once;
    only its SHA-256 is stored). The session ends after ``max_age_s`` seconds. The user's expired
    and signed-out sessions are deleted on the way."""
    from sqlalchemy import delete, or_

    session.execute(delete(WebSession).where(WebSession.user_id == user.id, or_(
        WebSession.expires_at <= utcnow(), WebSession.revoked_at.is_not(None))))
    raw = SESSION_PREFIX + secrets.token_urlsafe(32)
    session.add(WebSession(user_id=user.id, token_hash=hash_token(raw),
                           expires_at=utcnow() + dt.timedelta(seconds=max_age_s)))
    session.flush()
    return raw


def web_session_user(session: Session, raw: str | None) -> User | None:
    """The user of an unexpired, unrevoked web session token, or ``None``."""
    if not raw or not raw.startswith(SESSION_PREFIX):
        return None
    row = session.scalar(select(WebSession).where(WebSession.token_hash == hash_token(raw),
                                                  WebSession.revoked_at.is_(None)))
    if row is None or _aware(row.expires_at) <= utcnow():
        return None
    return row.user


def end_web_session(session: Session, raw: str | None) -> None:
    """Sign out: revoke the web session of ``raw`` (nothing when unknown)."""
    if not raw:
        return
    row = session.scalar(select(WebSession).where(WebSession.token_hash == hash_token(raw)))
    if row is not None and row.revoked_at is None:
        row.revoked_at = utcnow()


def csrf_token(raw_session: str) -> str:
    """The CSRF token of a web session: HMAC-SHA256 of a fixed label keyed by the raw session
    token (only the signed-in browser knows it). Compare with :func:`check_csrf`."""
    return hmac.new(raw_session.encode(), b"kernelrank-csrf", hashlib.sha256).hexdigest()


def check_csrf(raw_session: str | None, submitted: str | None) -> bool:
    """Whether ``submitted`` is the CSRF token of the session ``raw_session`` (constant time)."""
    if not raw_session or not submitted:
        return False
    return hmac.compare_digest(csrf_token(raw_session), submitted)


def _aware(value: dt.datetime) -> dt.datetime:
    """SQLite hands times back naive; they are UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
