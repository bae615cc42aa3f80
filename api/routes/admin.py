"""``/api/v1/admin``: problem administration and moderation (admins only: 401 without a token,
403 for anyone else).

- ``POST /problems``: push a problem (an archive: ``problem.yaml`` + ``reference/``; see
  :mod:`kernelrank.services.problem_admin`); its reference must pass its own tests.
- ``POST /problems/{name}/open|close|hide|unhide``: the problem's state.
- ``POST /submissions/{id}/disqualify|reinstate|requeue|clear-review``: moderation.
- ``GET /submissions/too-noisy``: submissions the service stopped measuring again, still too noisy
  to rank (:mod:`kernelrank.services.remeasure`); a requeue takes one off the list.
- ``GET /limits``, ``PUT /limits``: the limits per board and mode (submissions per user per hour).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query, Request, status
from fastapi.exceptions import RequestValidationError
from starlette.datastructures import UploadFile

from kernelrank.api.deps import AdminUser, DispatchDep, ReferenceCheckDep, SessionDep, SettingsDep
from kernelrank.api.edge import Id, body_limit, problem_body_bytes
from kernelrank.api.presenters import board_limit_public, problem_pushed, problem_state_public, submission_public
from kernelrank.api.schemas import (
    BoardLimitPublic,
    BoardLimitSet,
    DisqualifyRequest,
    ProblemCloseRequest,
    ProblemPushed,
    ProblemStatePublic,
    SubmissionPublic,
)
from kernelrank.services import TooLarge, limits, problem_admin, problems, remeasure, submissions

router = APIRouter(prefix="/api/v1/admin", tags=["admin"])

_ADMIN = {401: {"description": "No valid token"}, 403: {"description": "Not an admin"}}

_PUSH_FORM = {
    "type": "object",
    "required": ["archive"],
    "properties": {
        "archive": {"type": "string", "format": "binary",
                    "description": "tar or tar.gz: problem.yaml at the top, the reference folder under reference/."},
        "hidden": {"type": "boolean", "default": False, "description": "Create a new problem hidden."},
    },
}


@dataclass(frozen=True)
class ProblemUpload:
    """A parsed push request: the archive's bytes and whether a new problem starts hidden."""

    archive: bytes
    hidden: bool


async def parse_upload(request: Request, settings: SettingsDep) -> ProblemUpload:
    """The multipart form of a push: ``archive`` (file), ``hidden`` (optional boolean field).

    Raises:
        TooLarge: a body or archive over ``settings.max_problem_bytes`` (413).
        RequestValidationError: not a multipart form, or no ``archive`` file (422).
    """
    limit = settings.max_problem_bytes
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > problem_body_bytes(settings):
        raise TooLarge(f"the upload is {declared} bytes; the limit is {limit} bytes")
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type != "multipart/form-data":
        raise RequestValidationError([{"type": "missing", "loc": ("body", "archive"), "input": None,
                                       "msg": "send the problem as multipart/form-data with an 'archive' file"}])
    async with request.form(max_files=1, max_fields=4) as form:
        upload = form.get("archive")
        hidden = str(form.get("hidden") or "").lower() in ("1", "true", "yes", "on")
        if not isinstance(upload, UploadFile):
            raise RequestValidationError([{"type": "missing", "loc": ("body", "archive"), "input": None,
                                           "msg": "Field required: the problem archive as an uploaded file"}])
        data = await upload.read(limit + 1)  # never more than one byte past the limit
    if len(data) > limit:
        raise TooLarge(f"the upload is over the limit of {limit} bytes")
    return ProblemUpload(data, hidden)


@router.post("/problems", response_model=ProblemPushed, status_code=status.HTTP_201_CREATED,
             summary="Push a problem", openapi_extra={"requestBody": {"required": True, "content": {
                 "multipart/form-data": {"schema": _PUSH_FORM}}}},
             responses={**_ADMIN, 409: {"description": "The content belongs to another problem"},
                        413: {"description": "Over settings.max_problem_bytes, or too many files"},
                        422: {"description": "Unsafe archive, invalid definition, or a reference that fails "
                                             "its own tests (the reason is in detail)"}})
@body_limit(problem_body_bytes)
def push_problem(_admin: AdminUser, upload: Annotated[ProblemUpload, Depends(parse_upload)], session: SessionDep,
                 settings: SettingsDep, check: ReferenceCheckDep) -> ProblemPushed:
    """Create a problem, or a new revision of one, from an uploaded folder. The definition must
    validate and the reference must pass its own test cases (the harness, on the CPU, in a
    subprocess with a time limit: this request takes seconds). New content becomes a new revision
    with its own leaderboard; older revisions stay readable. Pushing known content makes that
    revision current again."""
    result = problem_admin.push_problem(session, upload.archive, settings.max_problem_bytes, check,
                                        hidden=upload.hidden)
    return problem_pushed(result)


@router.post("/problems/{name}/open", response_model=ProblemStatePublic, summary="Open a problem",
             responses={**_ADMIN, 404: {"description": "Unknown problem"}})
def open_problem(name: str, _admin: AdminUser, session: SessionDep) -> ProblemStatePublic:
    """Visible to everyone and taking leaderboard submissions, with no deadline."""
    return problem_state_public(problems.open_problem(session, name))


@router.post("/problems/{name}/close", response_model=ProblemStatePublic, summary="Close a problem",
             responses={**_ADMIN, 404: {"description": "Unknown problem"},
                        422: {"description": "A deadline without a time zone"}})
def close_problem(name: str, _admin: AdminUser, session: SessionDep,
                  body: Annotated[ProblemCloseRequest | None, Body()] = None) -> ProblemStatePublic:
    """Set the deadline (now when none is given): leaderboard submissions made from then on are
    refused (409); those made before are still ranked when judged. Test, benchmark and profile
    runs are still taken."""
    return problem_state_public(problems.close_problem(session, name, body.deadline if body else None))


@router.post("/problems/{name}/hide", response_model=ProblemStatePublic, summary="Hide a problem",
             responses={**_ADMIN, 404: {"description": "Unknown problem"}})
def hide_problem(name: str, _admin: AdminUser, session: SessionDep) -> ProblemStatePublic:
    """Not listed, 404 to anyone but admins (its submissions stay readable by id by their owners)."""
    return problem_state_public(problems.hide_problem(session, name, True))


@router.post("/problems/{name}/unhide", response_model=ProblemStatePublic, summary="Show a hidden problem",
             responses={**_ADMIN, 404: {"description": "Unknown problem"}})
def unhide_problem(name: str, _admin: AdminUser, session: SessionDep) -> ProblemStatePublic:
    """Visible again (the deadline is unchanged)."""
    return problem_state_public(problems.hide_problem(session, name, False))


@router.post("/submissions/{submission_id}/disqualify", response_model=SubmissionPublic,
             summary="Disqualify a submission",
             responses={**_ADMIN, 404: {"description": "No such submission"}, 422: {"description": "No reason"}})
def disqualify(submission_id: Id, body: DisqualifyRequest, admin: AdminUser, session: SessionDep) -> SubmissionPublic:
    """Take the submission out of the ranking; the reason is shown to its author."""
    sub = submissions.disqualify(session, admin, submission_id, body.reason)
    return submission_public(sub, full=True, with_code=False, admin=True)


@router.post("/submissions/{submission_id}/clear-review", response_model=SubmissionPublic,
             summary="Clear a submission's review mark",
             responses={**_ADMIN, 404: {"description": "No such submission"},
                        409: {"description": "Not marked for review"}})
def clear_review(submission_id: Id, _admin: AdminUser, session: SessionDep) -> SubmissionPublic:
    """An admin checked a submission marked for review (a speedup beyond its problem's bound) and
    found it sound: the mark leaves the leaderboard."""
    return submission_public(submissions.clear_review(session, submission_id), full=True, with_code=False, admin=True)


@router.post("/submissions/{submission_id}/reinstate", response_model=SubmissionPublic,
             summary="Undo a disqualification",
             responses={**_ADMIN, 404: {"description": "No such submission"}})
def reinstate(submission_id: Id, _admin: AdminUser, session: SessionDep) -> SubmissionPublic:
    """Ranked again when its runs earn it."""
    return submission_public(submissions.reinstate(session, submission_id), full=True, with_code=False, admin=True)


@router.post("/submissions/{submission_id}/requeue", response_model=SubmissionPublic,
             status_code=status.HTTP_202_ACCEPTED, summary="Requeue a submission",
             responses={**_ADMIN, 404: {"description": "No such submission"},
                        409: {"description": "Still queued or running (use force=true if its job is lost)"},
                        503: {"description": "The job queue is unavailable"}})
def requeue(submission_id: Id, _admin: AdminUser, session: SessionDep, dispatch: DispatchDep,
            force: Annotated[bool, Query(description="Requeue even while queued or running.")] = False,
            ) -> SubmissionPublic:
    """Judge the submission again as a new attempt (older runs stay as history, never counted)."""
    sub = submissions.requeue(session, submission_id, dispatch, force=force)
    return submission_public(sub, full=True, with_code=False, admin=True)


@router.get("/submissions/too-noisy", response_model=list[SubmissionPublic],
            summary="Submissions that could not be measured quietly enough", responses=_ADMIN)
def too_noisy(_admin: AdminUser, session: SessionDep) -> list[SubmissionPublic]:
    """Passing leaderboard submissions the service measured again as often as it may (backing off
    from a busy machine) and still could not rank: too noisy, not measured, or runs that disagree.
    The latest first; requeue one to measure it afresh."""
    return [submission_public(sub, full=True, with_code=False, admin=True) for sub in remeasure.too_noisy(session)]


@router.get("/limits", response_model=list[BoardLimitPublic], summary="Limits per board and mode",
            responses=_ADMIN)
def list_board_limits(_admin: AdminUser, session: SessionDep) -> list[BoardLimitPublic]:
    """Every limit of submissions per user per hour set on a board and mode."""
    return [board_limit_public(rule) for rule in limits.board_limits(session)]


@router.put("/limits", response_model=list[BoardLimitPublic], summary="Set or remove a board's limit",
            responses={**_ADMIN, 404: {"description": "Unknown problem"},
                       422: {"description": "Not a mode or a device queue"}})
def set_board_limit(body: BoardLimitSet, _admin: AdminUser, session: SessionDep) -> list[BoardLimitPublic]:
    """Each user may make at most ``per_hour`` submissions of ``mode`` to the board in any rolling
    hour (0 removes the limit; admins are exempt); answers every limit now set."""
    limits.set_board_limit(session, body.problem, body.device, body.mode, body.per_hour)
    return [board_limit_public(rule) for rule in limits.board_limits(session)]
