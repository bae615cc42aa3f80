"""``/api/v1/submissions``: submit a kernel, read a submission, list one's own.

A submission arrives either as a multipart form (``problem``, ``device``, ``mode``, ``file``) or as
a JSON body (:class:`~kernelrank.api.schemas.SubmissionCreate`); the ``Content-Type`` decides.
Code and logs are shown to the owner and admins only.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from kernelrank.api.deps import CurrentUser, DispatchDep, OptionalUser, SessionDep, SettingsDep, release
from kernelrank.api.edge import Id, Offset, body_limit, submission_body_bytes
from kernelrank.api.presenters import submission_public
from kernelrank.api.schemas import SubmissionAccepted, SubmissionCreate, SubmissionPublic
from kernelrank.api.watch import MAX_WAIT_S
from kernelrank.db.models import Submission, User
from kernelrank.services import TooLarge, bundles, limits, queueing, submissions
from kernelrank.services.submission_state import state_tag
from kernelrank.vocab import CPU_QUEUE, MODES, Mode, SubmissionStatus

router = APIRouter(prefix="/api/v1/submissions", tags=["submissions"])
log = logging.getLogger("kernelrank.api.submissions")



@dataclass(frozen=True)
class NewSubmission:
    """A parsed submission request: the code as raw bytes, validated by the service."""

    problem: str
    device: str
    mode: str
    raw: bytes
    filename: str


def _field_errors(e: ValidationError) -> RequestValidationError:
    return RequestValidationError([{**err, "loc": ("body", *err["loc"])} for err in e.errors(include_url=False)])


async def _from_json(request: Request, limit: int, cap: int) -> NewSubmission:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > cap:
            raise TooLarge(f"request body is over {cap} bytes; code is limited to {limit} bytes")
    try:  # the standard parser keeps a lone surrogate ("\\ud800"), so the code check can name it
        payload = json.loads(bytes(body))
    except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8/16/32
        raise RequestValidationError([{"type": "json_invalid", "loc": ("body",), "input": None,
                                       "msg": f"JSON decode error: {getattr(e, 'msg', e)}"}]) from None
    try:
        data = SubmissionCreate.model_validate(payload)
    except ValidationError as e:
        raise _field_errors(e) from None
    # a lone surrogate ("\ud800") survives JSON but is not UTF-8: keep it, and let validation refuse it
    raw = data.code.encode("utf-8", "surrogatepass")
    return NewSubmission(data.problem, data.device, data.mode, raw, data.filename or "submission.py")


async def _from_form(request: Request, limit: int) -> NewSubmission:
    async with request.form(max_files=1, max_fields=8) as form:
        fields: dict[str, Any] = {k: form.get(k) for k in ("problem", "device", "mode")}
        upload = form.get("file")
        if isinstance(upload, UploadFile):
            raw = await upload.read(limit + 1)  # never more than one byte past the limit
            filename = upload.filename or "submission.py"
        elif isinstance(upload, str):  # curl -F "file=<k.py" sends a plain field
            raw, filename = upload.encode("utf-8"), "submission.py"
        else:
            raise RequestValidationError([{"type": "missing", "loc": ("body", "file"),
                                           "msg": "Field required: the kernel source as an uploaded file",
                                           "input": None}])
    if len(raw) > limit:
        raise TooLarge(f"submission is over the limit of {limit} bytes")
    text_fields = {k: v for k, v in fields.items() if v is not None}
    if any(not isinstance(v, str) for v in text_fields.values()):
        raise RequestValidationError([{"type": "string_type", "loc": ("body", k), "msg": "must be a text field",
                                       "input": None} for k, v in text_fields.items() if not isinstance(v, str)])
    try:  # the same field rules as the JSON body; the code is checked by the service
        data = SubmissionCreate.model_validate({**text_fields, "code": "", "filename": filename[:255]})
    except ValidationError as e:
        raise _field_errors(e) from None
    return NewSubmission(data.problem, data.device, data.mode, raw, filename)


async def parse_submission(request: Request, settings: SettingsDep) -> NewSubmission:
    """The submission in the request body, multipart form or JSON.

    Raises:
        TooLarge: a body or file over the size limit (413).
        RequestValidationError: missing or malformed fields (422).
        HTTPException: 415 for any other content type.
    """
    from fastapi import HTTPException

    limit, cap = settings.max_code_bytes, submission_body_bytes(settings)
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > cap:
        raise TooLarge(f"request body is {declared} bytes; code is limited to {limit} bytes")
    if content_type == "multipart/form-data":
        return await _from_form(request, limit)
    if content_type == "application/json" or content_type.endswith("+json"):
        return await _from_json(request, limit, cap)
    raise HTTPException(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
                        "send the submission as multipart/form-data (file=@kernel.py) or application/json")


_FORM_SCHEMA = {
    "type": "object",
    "required": ["problem", "file"],
    "properties": {
        "problem": {"type": "string", "examples": ["softmax"]},
        "device": {"type": "string", "default": CPU_QUEUE, "description": "cpu or cuda-<model>"},
        "mode": {"type": "string", "default": Mode.leaderboard.value, "enum": list(MODES)},
        "file": {"type": "string", "format": "binary", "description": "The kernel's Python source (UTF-8)."},
    },
}


@router.post(
    "", status_code=status.HTTP_202_ACCEPTED, response_model=SubmissionAccepted, summary="Submit a kernel",
    openapi_extra={"requestBody": {"required": True, "content": {
        "multipart/form-data": {"schema": _FORM_SCHEMA},
        "application/json": {"schema": SubmissionCreate.model_json_schema()},
    }}},
    responses={401: {"description": "No valid token"}, 404: {"description": "Unknown problem"},
               413: {"description": "Code over the size limit"}, 415: {"description": "Neither form nor JSON"},
               409: {"description": "Leaderboard mode on a closed problem (past its deadline)"},
               422: {"description": "Unknown mode or device, a device no runner serves, empty or non-UTF-8 code"},
               429: {"description": "Over the hourly quota, the concurrent-job limit or the board's limit; "
                                   "see Retry-After"},
               503: {"description": "The database or the job queue is unavailable"}},
)
@body_limit(submission_body_bytes)
def create_submission(user: CurrentUser, new: Annotated[NewSubmission, Depends(parse_submission)],
                      session: SessionDep, settings: SettingsDep, dispatch: DispatchDep,
                      response: Response) -> SubmissionAccepted:
    """Store a kernel and queue its evaluation on the device's runners; poll the returned id."""
    from kernelrank.services.runners import served

    sub = submissions.create_submission(
        session, user, new.problem, new.device, new.mode, new.raw, new.filename,
        served(session, settings.runner_online_seconds, settings.runner_remember_hours), settings.max_code_bytes, dispatch,
        quota=limits.Limits.from_settings(settings),
    )
    response.headers["Location"] = f"{router.prefix}/{sub.id}"
    log.info("submission accepted", extra={"submission_id": sub.id, "user": user.name, "problem": new.problem,
                                           "device": new.device, "mode": new.mode})
    return SubmissionAccepted(id=sub.id, status=sub.status, message=sub.message or "")


@router.get("", response_model=list[SubmissionPublic], summary="My submissions",
            responses={401: {"description": "No valid token"}})
def list_submissions(
    user: CurrentUser, session: SessionDep, settings: SettingsDep,
    problem: Annotated[str | None, Query(max_length=64)] = None,
    device: Annotated[str | None, Query(max_length=64)] = None,
    status_: Annotated[SubmissionStatus | None, Query(alias="status")] = None,
    disqualified: Annotated[bool | None, Query(description="Only disqualified (true) or not (false).")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Offset = 0,
) -> list[SubmissionPublic]:
    """The caller's submissions, newest first, filtered by problem, device queue and verdict
    (``code`` and ``logs`` null: read one for them)."""
    subs = submissions.list_for_user(session, user, problem=problem, device_queue=device,
                                     status=status_.value if status_ else None,
                                     limit=limit, offset=offset, disqualified=disqualified)
    online_s = settings.runner_online_seconds
    return [submission_public(sub, full=True, with_code=False, queue=queueing.place_in_queue(session, sub, online_s))
            for sub in subs]


#: ``wait``: seconds a read with ``If-None-Match`` may wait for the submission's state to change.
Wait = Annotated[float, Query(ge=0, le=MAX_WAIT_S, description=(
    "With `If-None-Match` holding the submission's last `ETag`: wait up to this many seconds for its "
    "state (status, progress, message, verdict) to change, and answer at once when it does: `304` if it "
    "did not. Without `If-None-Match`, or with another tag, the answer comes at once."))]


@router.get("/{submission_id}", response_model=SubmissionPublic, summary="One submission",
            responses={304: {"description": "Its state is still the `If-None-Match` tag's (after `wait`)"},
                       401: {"description": "Invalid token"}, 404: {"description": "No such submission"}})
async def get_submission(submission_id: Id, request: Request, response: Response, viewer: OptionalUser,
                         session: SessionDep, settings: SettingsDep, wait: Wait = 0.0,
                         if_none_match: Annotated[str | None, Header()] = None) -> Any:
    """A submission's status and verdict (public; for a hidden problem, its owner's and admins'
    only); code, logs and error details for its owner and admins; while queued, its place in its
    device queue and an estimated start. Its ``ETag`` (weak) is its state's tag: a client waits for
    the next change with ``If-None-Match`` and ``wait`` instead of polling (the CLI does)."""
    sub = await run_in_threadpool(submissions.get_visible_submission, session, submission_id, viewer)
    tag = state_tag(sub)
    if wait > 0 and _matches(if_none_match, tag):
        await run_in_threadpool(release, session)  # no connection held while it waits
        if await request.app.state.watch.changed(submission_id, tag, wait) != tag:
            sub = await run_in_threadpool(_reload, session, submission_id, viewer)
            tag = state_tag(sub)
    if _matches(if_none_match, tag):
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers={"ETag": _etag(tag)})
    response.headers["ETag"] = _etag(tag)
    return await run_in_threadpool(_present, session, sub, viewer, settings.runner_online_seconds)


def _reload(session: Session, submission_id: int, viewer: User | None) -> Submission:
    session.expire_all()  # read again after the wait
    return submissions.get_visible_submission(session, submission_id, viewer)


def _present(session: Session, sub: Submission, viewer: User | None, online_s: float) -> SubmissionPublic:
    full = submissions.can_see_code(viewer, sub)
    return submission_public(sub, full=full, with_code=full, admin=bool(viewer and viewer.is_admin),
                             queue=queueing.place_in_queue(session, sub, online_s))


def _etag(tag: str) -> str:
    return f'W/"{tag}"'


def _matches(if_none_match: str | None, tag: str) -> bool:
    """Whether an ``If-None-Match`` header names ``tag`` (weak comparison, RFC 9110 13.1.2)."""
    if not if_none_match or not tag:
        return False
    names = {t.strip().removeprefix("W/").strip('"') for t in if_none_match.split(",")}
    return tag in names or "*" in names


@router.get("/{submission_id}/bundle", summary="A score's reproducibility bundle",
            responses={401: {"description": "Invalid token"}, 404: {"description": "No such submission"}})
def get_bundle(submission_id: Id, viewer: OptionalUser, session: SessionDep) -> dict[str, Any]:
    """One JSON document with what produced the submission's numbers: the code's SHA-256, the problem
    revision, cases and seeds (the secret seed once the problem is closed, or to admins), per counted
    run its runner's facts, ceilings and isolation, and per benchmark case the timing figures and
    the judged paired samples, with how to recompute the speedup and score from them with
    ``kernelrank.runner.stats`` (``kernelrank.services.bundles``). Visible to whoever may read the
    submission."""
    sub = submissions.get_visible_submission(session, submission_id, viewer)
    return bundles.bundle(session, sub, viewer)


@router.post("/{submission_id}/cancel", response_model=SubmissionPublic, summary="Cancel a queued submission",
             responses={401: {"description": "No valid token"}, 403: {"description": "Not the owner nor an admin"},
                        404: {"description": "No such submission"},
                        409: {"description": "Not queued any more (running or finished)"}})
def cancel_submission(submission_id: Id, user: CurrentUser, session: SessionDep) -> SubmissionPublic:
    """Cancel one of your queued submissions (admins: anyone's): it becomes ``cancelled``, is never
    judged and does not count against your limits."""
    sub = submissions.cancel_submission(session, user, submission_id)
    log.info("submission cancelled", extra={"submission_id": sub.id, "user": user.name})
    return submission_public(sub, full=True, with_code=True)
