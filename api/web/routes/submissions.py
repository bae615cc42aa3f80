"""Submission pages: submitting through a form, one submission (its status updating live while
it is queued or running), and "My submissions" with filters.

Live status: the page polls ``/submissions/{id}/live`` (the same HTML fragment the page renders,
built by the server for the viewer) once a second with a small script, and swaps it in, until
the verdict arrives. Code, logs, full error messages and the profile table follow the JSON API's
rule (:func:`kernelrank.services.submissions.can_see_code`: the owner and admins).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException

from kernelrank.api.deps import DispatchDep, SessionDep, SettingsDep
from kernelrank.api.edge import Id, PageNumber, body_limit, submission_body_bytes
from kernelrank.api.presenters import submission_public
from kernelrank.api.web.deps import PageUser, check_csrf, render
from kernelrank.api.web.signin import signin_redirect
from kernelrank.db.models import utcnow
from kernelrank.format import queue_place
from kernelrank.services import Invalid, TooLarge, calibration, limits, problems, queueing, runners, submissions
from kernelrank.vocab import CPU_QUEUE, FINAL_STATUSES, MODES, STATUSES, CaseKind, Mode, RunKind

router = APIRouter(include_in_schema=False)

#: Rows per page of "My submissions".
PAGE_SIZE = 50


def _view(session, sub, user, online_s: float) -> dict[str, Any]:
    full = submissions.can_see_code(user, sub)
    admin = bool(user and user.is_admin)
    place = queueing.place_in_queue(session, sub, online_s)
    queue = ""
    if place is not None:
        start = place.estimated_start
        queue = queue_place(place.position, (start - utcnow()).total_seconds() if start else None)
    return {"sub": submission_public(sub, full=full, with_code=full, admin=admin, queue=place), "full": full,
            "final": sub.status in FINAL_STATUSES, "queue": queue,
            "rebase_note": calibration.rebase_note(session, sub), "id": sub.id}


@router.post("/problems/{name}/submit")
@body_limit(submission_body_bytes)
async def submit(name: str, request: Request, session: SessionDep, settings: SettingsDep,
                 dispatch: DispatchDep, user: PageUser):
    """Store a kernel from the problem page's form and queue it, like ``POST /api/v1/submissions``;
    then show the new submission's page.

    Raises:
        Forbidden: a missing or wrong CSRF token.
        Invalid, TooLarge, NotFound: as :func:`kernelrank.services.submissions.create_submission`.
    """
    if user is None:
        return signin_redirect(f"/problems/{name}")
    limit = settings.max_code_bytes
    try:  # pasted code is a form field: the parser refuses fields over max_part_size
        form = await request.form(max_files=1, max_fields=8, max_part_size=limit + 1024)
    except StarletteHTTPException as e:
        if e.status_code != 400:  # the edge's 401/408/413
            raise
        if "maximum size" in str(e.detail):
            raise TooLarge(f"submission is over the limit of {limit} bytes") from None
        raise Invalid(f"malformed form: {e.detail}") from None
    try:
        check_csrf(request, str(form.get("csrf") or ""))
        device, mode = str(form.get("device") or CPU_QUEUE), str(form.get("mode") or Mode.leaderboard.value)
        upload, pasted = form.get("file"), str(form.get("code") or "")
        raw, filename = b"", "submission.py"
        if isinstance(upload, UploadFile) and upload.filename:
            raw = await upload.read(limit + 1)
            filename = upload.filename
        elif pasted.strip():
            raw = pasted.replace("\r\n", "\n").encode("utf-8", "surrogatepass")
    finally:
        await form.close()
    if not raw.strip():
        raise Invalid("choose a kernel file or paste its code")
    if len(raw) > limit:
        raise TooLarge(f"submission is over the limit of {limit} bytes")
    sub = submissions.create_submission(
        session, user, name, device, mode, raw, filename[:255],
        runners.served(session, settings.runner_online_seconds, settings.runner_remember_hours), limit, dispatch,
        quota=limits.Limits.from_settings(settings))
    return RedirectResponse(f"/submissions/{sub.id}", status_code=303)


@router.get("/submissions/{submission_id}", response_class=HTMLResponse)
def submission_page(submission_id: Id, request: Request, session: SessionDep, settings: SettingsDep,
                    user: PageUser):
    """Status (live until the verdict), per-case correctness and timing, roofline, speedup,
    profile table; code and logs for the owner and admins."""
    sub = submissions.get_submission(session, submission_id)
    return render(request, "submission.html", user, **_view(session, sub, user, settings.runner_online_seconds))


@router.get("/submissions/{submission_id}/live", response_class=HTMLResponse)
def submission_live(submission_id: Id, request: Request, session: SessionDep, settings: SettingsDep,
                    user: PageUser):
    """The status-and-results fragment of a submission page, for the page's polling script."""
    sub = submissions.get_submission(session, submission_id)
    response = render(request, "_submission_live.html", user, **_view(session, sub, user, settings.runner_online_seconds))
    response.headers["Cache-Control"] = "no-store"
    return response


@router.get("/submissions/{submission_id}/roofline.svg")
def roofline_svg(submission_id: int, session: SessionDep, user: PageUser) -> Response:
    """SVG: the public run's benchmark cases on the roofline of the runner that ran them
    (:func:`kernelrank.api.web.charts.roofline_chart`); 404 when the run has no roofline."""
    from kernelrank.services import NotFound
    from kernelrank.api.web import charts

    sub = submissions.get_submission(session, submission_id)
    result = submission_public(sub, full=False, with_code=False).runs
    public = next((r.result for r in result if r.kind == RunKind.public), None) or {}
    ceilings = public.get("ceilings")
    points = [(f"#{c.get('index')} {case_text(c.get('spec'))}", c["roofline"]["intensity"], c["tflops"],
               c["roofline"].get("dtype"))
              for c in public.get("cases") or []
              if isinstance(c, dict) and c.get("kind") == CaseKind.benchmark and isinstance(c.get("roofline"), dict)
              and c["roofline"].get("intensity") and isinstance(c.get("tflops"), (int, float))]
    if not isinstance(ceilings, dict) or not points:
        raise NotFound(f"submission {submission_id} has no roofline to draw")
    svg = charts.roofline_chart(points, ceilings, f"Roofline of submission {submission_id} on {sub.device}")
    return Response(svg, media_type="image/svg+xml", headers=charts.SVG_HEADERS)


def case_text(spec: Any) -> str:
    """A case's parameters without its seed, as the tables show them (``M=512 N=512``)."""
    return " ".join(f"{k}={v}" for k, v in (spec or {}).items() if k != "seed") if isinstance(spec, dict) else ""


@router.get("/me/submissions", response_class=HTMLResponse)
def my_submissions(request: Request, session: SessionDep, user: PageUser, problem: str = "", device: str = "",
                   status: str = "", page: PageNumber = 1):
    """The signed-in user's submissions, newest first, filtered by problem, device and verdict,
    :data:`PAGE_SIZE` per page."""
    if user is None:
        return signin_redirect("/me/submissions")
    page = max(1, page)
    if status and status not in STATUSES:
        raise Invalid(f"unknown status {status!r}; one of {', '.join(STATUSES)}")
    rows = submissions.list_for_user(session, user, problem=problem[:64] or None, device_queue=device[:64] or None,
                                     status=status or None, limit=PAGE_SIZE + 1, offset=(page - 1) * PAGE_SIZE)
    names = [rev.problem.name for rev in problems.list_current(session)]
    return render(request, "my_submissions.html", user, rows=rows[:PAGE_SIZE], more=len(rows) > PAGE_SIZE,
                  page=page, problems=names, statuses=STATUSES, modes=MODES,
                  filters={"problem": problem, "device": device, "status": status})
