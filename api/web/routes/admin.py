"""Admin pages: push a problem (upload an archive), open / close (with a deadline) / hide
problems, and moderate submissions (disqualify with a reason, reinstate, requeue); the list of
submissions that could not be measured quietly enough (:mod:`kernelrank.services.remeasure`).

Every action is a form post checked for the session's CSRF token, and calls the same service
functions as ``/api/v1/admin/...``. Non-admins get 403; signed-out browsers go to sign-in.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.datastructures import UploadFile

from kernelrank.api.deps import DispatchDep, ReferenceCheckDep, SessionDep, SettingsDep
from kernelrank.api.edge import Id, body_limit, problem_body_bytes
from kernelrank.api.web.deps import PageUser, check_csrf, render
from kernelrank.api.web.signin import signin_redirect
from kernelrank.db.models import User
from kernelrank.services import Forbidden, Invalid, TooLarge, problem_admin, problems, remeasure, submissions

router = APIRouter(prefix="/admin", include_in_schema=False)


def _admin(user: User | None) -> User:
    """Raises: Forbidden unless an admin is signed in."""
    if user is None or not user.is_admin:
        raise Forbidden("only an admin may do that")
    return user


def _deadline(text: str) -> dt.datetime | None:
    """A ``<input type=datetime-local>`` value, read as UTC; ``None`` when empty (close now).

    Raises:
        Invalid: not a date and time.
    """
    if not text.strip():
        return None
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise Invalid(f"not a date and time: {text[:40]!r} (use YYYY-MM-DDTHH:MM, UTC)") from None
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


@router.get("", response_class=HTMLResponse)
def admin_page(request: Request, session: SessionDep, user: PageUser):
    """Every problem (hidden ones included) with its state and actions, and the push form."""
    if user is None:
        return signin_redirect("/admin")
    _admin(user)
    rows = [{"rev": rev, "state": problems.state_of(rev.problem), "deadline": problems.deadline_of(rev.problem)}
            for rev in problems.list_current(session, include_hidden=True)]
    return render(request, "admin.html", user, problems=rows, pushed=None, too_noisy=remeasure.too_noisy(session))


@dataclass(frozen=True)
class PageUpload:
    """The push form: the archive's bytes, whether a new problem starts hidden, the CSRF field."""

    archive: bytes
    hidden: bool
    csrf: str


async def parse_page_upload(request: Request, settings: SettingsDep, user: PageUser) -> PageUpload:
    """The push form, read only once an admin is known to be signed in (a stranger's upload is
    refused before its body is read).

    Raises:
        Forbidden: not an admin. TooLarge: an archive over ``settings.max_problem_bytes``.
        Invalid: no archive file, or a malformed form.
    """
    from starlette.exceptions import HTTPException as StarletteHTTPException

    _admin(user)
    limit = settings.max_problem_bytes
    try:
        form = await request.form(max_files=1, max_fields=4, max_part_size=64 * 1024)
    except StarletteHTTPException as e:
        if e.status_code != 400:  # the edge's 401/408/413
            raise
        raise Invalid(f"malformed form: {e.detail}") from None
    try:
        upload = form.get("archive")
        if not isinstance(upload, UploadFile):
            raise Invalid("choose a problem archive (tar or tar.gz)")
        data = await upload.read(limit + 1)
        hidden = str(form.get("hidden") or "").lower() in ("1", "true", "yes", "on")
        csrf = str(form.get("csrf") or "")
    finally:
        await form.close()
    if len(data) > limit:
        raise TooLarge(f"the archive is over {limit} bytes")
    return PageUpload(data, hidden, csrf)


@router.post("/problems", response_class=HTMLResponse)
@body_limit(problem_body_bytes)
def push(request: Request, session: SessionDep, settings: SettingsDep, check: ReferenceCheckDep, user: PageUser,
         upload: Annotated[PageUpload, Depends(parse_page_upload)]):
    """Create or revise a problem from an uploaded archive (``problem.yaml`` + ``reference/``), after
    its reference passes its own tests (blocking: this is a sync route, run in a worker thread).

    Raises:
        TooLarge, Invalid, Conflict: as :func:`kernelrank.services.problem_admin.push_problem`.
    """
    _admin(user)
    check_csrf(request, upload.csrf)
    result = problem_admin.push_problem(session, upload.archive, settings.max_problem_bytes, check,
                                        hidden=upload.hidden)
    name = result.revision.problem.name
    rows = [{"rev": rev, "state": problems.state_of(rev.problem), "deadline": problems.deadline_of(rev.problem)}
            for rev in problems.list_current(session, include_hidden=True)]
    return render(request, "admin.html", user, status_code=201, problems=rows, too_noisy=remeasure.too_noisy(session),
                  pushed={"name": name, "revision": result.revision.revision, "new_problem": result.new_problem,
                          "new_revision": result.new_revision})


@router.post("/problems/{name}/{action}")
def problem_action(name: str, action: str, request: Request, session: SessionDep, user: PageUser,
                   csrf: str = Form(""), deadline: str = Form("")):
    """``open``, ``close`` (now, or at ``deadline``), ``hide`` or ``unhide`` a problem.

    Raises:
        NotFound: unknown problem or action. Invalid: a malformed deadline.
    """
    _admin(user)
    check_csrf(request, csrf)
    if action == "open":
        problems.open_problem(session, name)
    elif action == "close":
        problems.close_problem(session, name, _deadline(deadline))
    elif action in ("hide", "unhide"):
        problems.hide_problem(session, name, hidden=action == "hide")
    else:
        raise Invalid(f"unknown action {action!r}: open, close, hide or unhide")
    return RedirectResponse("/admin", status_code=303)


@router.post("/submissions/{submission_id}/{action}")
def submission_action(submission_id: Id, action: str, request: Request, session: SessionDep,
                      dispatch: DispatchDep, user: PageUser, csrf: str = Form(""), reason: str = Form(""),
                      force: bool = Form(False)):
    """``disqualify`` (with a reason shown to the author), ``reinstate`` or ``requeue`` a submission.

    Raises:
        NotFound: unknown submission. Invalid: empty reason, unknown action. Conflict: requeue of a
            submission still queued or running without ``force``.
    """
    admin = _admin(user)
    check_csrf(request, csrf)
    if action == "disqualify":
        submissions.disqualify(session, admin, submission_id, reason)
    elif action == "reinstate":
        submissions.reinstate(session, submission_id)
    elif action == "clear-review":
        submissions.clear_review(session, submission_id)
    elif action == "requeue":
        submissions.requeue(session, submission_id, dispatch, force=force)
    else:
        raise Invalid(f"unknown action {action!r}: disqualify, reinstate, requeue or clear-review")
    return RedirectResponse(f"/submissions/{submission_id}", status_code=303)


@router.get("/go")
def go_to_submission(id: Id, user: PageUser):
    """The moderation form's jump to a submission page."""
    _admin(user)
    return RedirectResponse(f"/submissions/{id}", status_code=303)
