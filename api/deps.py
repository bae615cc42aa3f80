"""Request dependencies as named ``Annotated`` aliases: settings, the database session, the caller,
and how evaluation jobs are dispatched.

- :data:`SettingsDep`: the app's :class:`~kernelrank.settings.Settings`.
- :data:`SessionDep`: one SQLAlchemy session per request, committed when the route succeeds and
  rolled back when it raises (before the response is sent, so a failed commit is an error answer).
- :data:`CurrentUser` (401 without a valid ``Authorization: Bearer <token>``), :data:`OptionalUser`
  (``None`` when no token is sent; 401 for an invalid, revoked or expired one), :data:`Viewer`
  (``None`` for no or an invalid token: public reads), :data:`AdminUser` (403 for non-admins).
  Each ends the session's transaction once the caller is known (:func:`release`), so that no
  database connection is held while an upload's body is still arriving (the body is read after
  the caller is known: otherwise a slow client keeps one of the pool's connections for as long as
  it takes to send, and twenty of them take all fifteen).
- :data:`DispatchDep`: ``dispatch(job, queue, time_limit_s)``; by default sends the Celery task
  :data:`kernelrank.queue.EVALUATE` by name. Tests override :func:`get_dispatch`.
- :data:`ReferenceCheckDep`: ``check(spec) -> reason | None``, how a pushed problem's reference
  is checked against its own tests (default: the harness in a subprocess,
  :func:`kernelrank.services.reference_check.check_reference`). Tests may override
  :func:`get_reference_check`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from kernelrank.db.models import Submission, User, utcnow
from kernelrank.services import ServiceError, users
from kernelrank.services.reference_check import ReferenceCheck
from kernelrank.services.submissions import Dispatch
from kernelrank.settings import Settings
from kernelrank.vocab import Verdict

log = logging.getLogger(__name__)



def get_settings_dep(request: Request) -> Settings:
    """The settings the app was created with."""
    return request.app.state.settings


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]


def get_session(request: Request) -> Iterator[Session]:
    """A session committed on success and rolled back on error."""
    session: Session = request.app.state.session_factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


# scope="function": commit before the response goes out, so a client never reads a 2xx for work
# that was then lost, and a failed commit reaches the exception handlers.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]

_bearer = HTTPBearer(auto_error=False, description="An API token: `Authorization: Bearer kr_...`.")


def release(session: Session) -> None:
    """Commit what the session did so far (a token's ``last_used_at``) and give its connection
    back to the pool; the session opens a new transaction, on a connection from the pool, at its
    next query. Called when the caller is known, before a route reads its body."""
    session.commit()


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(status.HTTP_401_UNAUTHORIZED, message, headers={"WWW-Authenticate": "Bearer"})


def get_optional_user(session: SessionDep,
                      credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> User | None:
    """The caller, or ``None`` when no token was sent.

    Raises:
        HTTPException: 401 for a token that is not (or no longer) valid.
    """
    if credentials is None:
        return None
    user = users.authenticate(session, credentials.credentials)
    release(session)
    if user is None:
        raise _unauthorized("invalid, revoked or expired API token")
    return user


OptionalUser = Annotated[User | None, Depends(get_optional_user)]


def get_viewer(session: SessionDep,
               credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> User | None:
    """The caller when a valid token is sent, else ``None``: public reads (problems, leaderboards)
    answer a wrong token as they answer no token; only what admins may see more of depends on it."""
    if credentials is None:
        return None
    user = users.authenticate(session, credentials.credentials)
    release(session)
    return user


Viewer = Annotated[User | None, Depends(get_viewer)]


def get_current_user(user: OptionalUser) -> User:
    """The caller.

    Raises:
        HTTPException: 401 without a valid bearer token.
    """
    if user is None:
        raise _unauthorized("an API token is required: send 'Authorization: Bearer <token>'")
    return user


CurrentUser = Annotated[User, Depends(get_current_user)]


def get_admin_user(user: CurrentUser) -> User:
    """The caller, who must be an admin.

    Raises:
        HTTPException: 401 without a valid token, 403 for a non-admin.
    """
    if not user.is_admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "only an admin may do that")
    return user


AdminUser = Annotated[User, Depends(get_admin_user)]


class QueueUnavailable(ServiceError):
    """The job could not be handed to the broker."""

    status_code = 503


def get_dispatch(session: SessionDep) -> Dispatch:
    """Send evaluation jobs to the device's Celery queue, by task name.

    The submission is committed before its job is sent, so a runner's reports (``job_started``,
    ``record_result``) always find it. When the broker refuses the job, the submission is marked
    ``error`` (it will never run) and the request fails with 503.
    """

    def dispatch(job: dict[str, Any], queue: str, time_limit: float) -> None:
        from kernelrank.queue import send_job

        session.commit()
        try:
            send_job(job, queue, time_limit)
        except Exception as e:  # the broker's errors vary by transport; none may reach the client
            # the exception text can hold the broker URL and its password: log only its type
            log.error("could not queue submission %s on %r: %s", job["submission_id"], queue, type(e).__name__)
            from kernelrank.services.competition_final import is_rejudging

            # a competition's re-judging stays queued (finalize sends it again); its submission is untouched
            sub = None if is_rejudging(job.get("attempt")) else session.get(Submission, job["submission_id"])
            if sub is not None:
                sub.status, sub.message, sub.finished_at = Verdict.error.value, "the job could not be queued", utcnow()
                session.commit()
            raise QueueUnavailable("the job queue is unavailable; try again later") from None

    return dispatch


DispatchDep = Annotated[Dispatch, Depends(get_dispatch)]


def get_reference_check() -> ReferenceCheck:
    """The harness's CPU test run of the reference, in a subprocess with a time limit."""
    from kernelrank.services.reference_check import check_reference

    return check_reference


ReferenceCheckDep = Annotated[ReferenceCheck, Depends(get_reference_check)]
