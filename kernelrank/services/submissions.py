"""Submissions: validation, creation and dispatch, the runner's reports, and reading them back.

Life of a submission: ``queued`` (created, job sent to the device's queue) -> ``running`` (a runner
reported it started) -> a verdict (``passed``, ``failed``, ``error``, ``timeout``,
``compile_error``, ``rejected``) once every expected run has been recorded: ``public`` in every
mode, plus ``secret`` in leaderboard mode. A leaderboard submission is ranked only when both runs
passed, it was made before the problem's deadline and it is not disqualified, neither run was too
noisy to rank nor interpreted (Triton's interpreter on the CPU), and the two runs agree; its score
is the runs' paired speedup (the geometric mean of the two runs' speedups, with an interval that
holds how far they differ, never narrower than the board's recent submissions' runs differ:
:func:`~kernelrank.runner.stats.combine_runs`, :func:`calibration.board_spread`) re-based on the board's
calibration (:mod:`kernelrank.services.calibration`), with its 95% interval. Runs whose speedups
differ too much to rank (:func:`~kernelrank.runner.stats.runs_disagree`: the machine's speed
changed between them), or a run too noisy to rank or that the judge could not measure (the machine
too busy), are measured again by themselves: a new attempt of both runs (``queued`` again, its
message says why and when), all of its runs then combined (:func:`kernelrank.judgement.judge`), up
to ``settings.remeasures`` times, each after a longer wait; after that it stays passed and unranked,
and the admins are told, until one requeues it (:mod:`kernelrank.services.remeasure`). A
``queued`` submission can be ``cancelled`` by its owner or an admin (:func:`cancel_submission`); a runner's later reports about it are dropped. Starts are counted and bounded, and jobs of
vanished runners requeued, by :mod:`kernelrank.services.jobs`.

A passing run whose speedup is beyond the problem's ``review_speedup`` marks the submission
``needs_review``: it is ranked, shown with the mark, until an admin clears it (:func:`clear_review`)
or disqualifies it.

Moderation (admins): :func:`disqualify` takes a submission out of the ranking with a reason its
author sees (:func:`reinstate` undoes it); :func:`requeue` judges it afresh as a new *attempt*: the
runs of older attempts stay as history and never count, the verdict comes from the new attempt's
runs (one per kind, as always) and the measurements the service makes again after it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import re
from typing import Any, Callable

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from kernelrank import format as fmt, judgement
from kernelrank.db.models import Run, Submission, User, utcnow
from kernelrank.judgement import RunRecord
from kernelrank.queue import job_time_limit
from kernelrank.roofline import FLOOR_REASON
from kernelrank.services import (Conflict, Forbidden, Invalid, NotFound, TooLarge, bundles, calibration, limits,
                                 remeasure, runners)
from kernelrank.services.problems import current_revision, deadline_of, definition, sees_hidden, spec_of, takes_ranked
from kernelrank.vocab import (FINAL_STATUSES, RUN_KINDS, VERDICTS, CaseKind, DeviceClass, Mode, RunKind, SubmissionStatus, Verdict,
                              device_class, parse_mode, run_kinds)

LOG_LIMIT = 256 * 1024

#: ``dispatch(job_message, queue, time_limit_s)``: sends the evaluation job (Celery by default).
Dispatch = Callable[[dict[str, Any], str, float], None]


def detect_language(code: str) -> str:
    """``cuda``, ``cpp``, ``triton`` or ``pytorch``, from what the source uses (for display and filters)."""
    if "load_inline" in code:
        return "cuda" if re.search(r"cuda_sources\s*=", code) else "cpp"
    if re.search(r"^\s*import triton|^\s*from triton", code, re.M):
        return "triton"
    return "pytorch"


def validate_code(raw: bytes, limit: int) -> str:
    """The submission's text.

    Raises:
        Invalid: empty, or not UTF-8.
        TooLarge: over ``limit`` bytes.
    """
    if len(raw) > limit:
        raise TooLarge(f"submission is {len(raw)} bytes; the limit is {limit} bytes")
    if not raw.strip():
        raise Invalid("submission is empty")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Invalid(f"submission is not UTF-8 text: {e}") from None


def create_submission(session: Session, user: User, problem: str, device_queue: str, mode: str, raw: bytes,
                      filename: str, served: runners.Served, limit: int, dispatch: Dispatch,
                      quota: limits.Limits | None = None) -> Submission:
    """Validate, store and queue a submission, within the user's ``quota`` and the board's limit
    (:func:`kernelrank.services.limits.check_submission`; ``None``: no limit checked).

    Raises:
        RateLimited: over a limit (429, with ``Retry-After``).
        NotFound: unknown problem (or hidden, unless ``user`` is an admin).
        Invalid: unknown mode or device, a device no runner has served lately (``served``:
            :func:`kernelrank.services.runners.served`; where none is online but one was lately,
            the job waits in its queue and the submission's message says so), empty or non-UTF-8 code.
        Conflict: leaderboard mode on a problem past its deadline (closed).
        TooLarge: code over ``limit`` bytes.
    """
    try:
        parse_mode(mode)
    except ValueError as e:
        raise Invalid(str(e)) from None
    try:
        device_class(device_queue)
    except ValueError as e:
        raise Invalid(str(e)) from None
    rev = current_revision(session, problem, include_hidden=sees_hidden(user))
    if mode == Mode.leaderboard and not takes_ranked(rev.problem):
        raise Conflict(f"problem {problem!r} closed at {deadline_of(rev.problem).isoformat()}: leaderboard "
                       "submissions are no longer taken (test, benchmark and profile runs still are)")
    cuda_only = definition(rev).cuda_only
    if cuda_only and device_class(device_queue) == DeviceClass.cpu:
        raise Invalid(f"problem {problem!r} runs on CUDA only ({cuda_only}): submit to a cuda-<model> device")
    if not served.takes(device_queue):
        known = ", ".join(sorted(served.queues)) or "none"
        raise Invalid(f"no runner serves device {device_queue!r} (devices served: {known})")
    code = validate_code(raw, limit)
    if quota is not None:
        limits.check_submission(session, user, quota, board=(rev.problem, device_queue, mode))
    sub = Submission(
        user_id=user.id, problem_revision_id=rev.id, device=device_queue, mode=mode, language=detect_language(code),
        filename=(filename or "submission.py")[:255], code=code, code_sha256=hashlib.sha256(raw).hexdigest(),
        status=SubmissionStatus.queued.value, dispatched_at=utcnow(), message=waiting_message(served, device_queue),
    )
    session.add(sub)
    session.flush()
    budgets = definition(rev).budgets.model_dump()
    dispatch(job_message(sub, rev.secret_seed), device_queue, job_time_limit(budgets, mode))
    return sub


def waiting_message(served: runners.Served, device_queue: str) -> str:
    """What a queued submission's message says where no runner of its queue is online now (it
    waits in the queue for one); empty where one is."""
    seen = served.waiting.get(device_queue)
    if seen is None:
        return ""
    ago = fmt.waited((utcnow() - seen).total_seconds())
    return (f"no runner of {device_queue} is online now (the last was seen {ago} ago): the job waits in its "
            "queue and starts when one is back")


def current_job(sub: Submission) -> tuple[dict[str, Any], str, float]:
    """The job of the submission's current attempt, as a :data:`Dispatch` takes it: its message
    (:func:`job_message`), its device queue and its hard time limit (s)."""
    rev = sub.problem_revision
    return job_message(sub, rev.secret_seed), sub.device, job_time_limit(definition(rev).budgets.model_dump(), sub.mode)


def _new_attempt(sub: Submission, message: str) -> None:
    """Start the submission's next attempt: ``queued`` with ``message``, not ranked and without a
    score until its runs are in, no runner yet, its own bound of starts."""
    sub.attempt += 1
    sub.status, sub.message, sub.ranked = SubmissionStatus.queued.value, message[:4000], False
    sub.score_ns = sub.score_low_ns = sub.score_high_ns = None
    sub.runner, sub.progress, sub.started_at, sub.finished_at = None, {}, None, None
    sub.starts, sub.dispatched_at = 0, utcnow()


def job_message(sub: Submission, secret_seed: int) -> dict[str, Any]:
    """Everything a runner needs for one job: no database credentials, no other user's data.
    The secret seed is read only by the runner's trusted side (it becomes the harness's secret)."""
    rev = sub.problem_revision
    return {
        "submission_id": sub.id,
        "problem": spec_of(rev).to_message(),
        "source": sub.code,
        "mode": sub.mode,
        "device": sub.device,
        "runs": list(run_kinds(sub.mode)),
        "secret_seed": secret_seed if sub.mode == Mode.leaderboard else None,
        "attempt": sub.attempt,
    }


def mark_started(session: Session, submission_id: int, runner: str) -> None:
    """A runner took the job; ignored when the submission already has its verdict."""
    sub = session.get(Submission, submission_id)
    if sub is None or sub.status in FINAL_STATUSES:
        return
    sub.status = SubmissionStatus.running.value
    sub.runner = runner[:255]
    sub.started_at = sub.started_at or utcnow()


def record_run(session: Session, submission_id: int, kind: str, result: dict[str, Any], runner: str,
               attempt: int | None = None, remeasures: int = 0, again: Dispatch | None = None,
               backoff: judgement.Backoff | None = None) -> bool:
    """Store one run's result for the submission's current attempt, once: a second delivery of the
    same (submission, attempt, kind) is ignored, and so is a result for another ``attempt`` than
    the current one (a job of before a requeue; ``None``: a runner that does not say). Sets the
    verdict when every expected run is in. Returns whether anything was written. A status that is
    not a :data:`~kernelrank.vocab.VERDICTS` verdict is stored as ``error`` (saying so), a
    ``score_ns`` that is not a finite number as ``None``.

    A passing leaderboard submission whose runs are too noisy to rank, could not be measured, or
    disagree, is measured again, up to ``remeasures`` times (``settings.remeasures``), when
    ``again`` is given: a new attempt whose runs are combined with the earlier ones
    (:func:`_finish_if_complete`), its job held for the ``backoff``'s wait (``None``: settings'
    ``remeasure_delay_seconds`` and ``remeasure_backoff``) and then sent by the sweeper
    (:mod:`kernelrank.services.remeasure`); with no wait its job is handed to ``again`` (message,
    device queue, time limit), for the caller to send once this session is committed (the sweeper
    sends it again if that fails). After the last, the admins are told.

    Raises:
        NotFound: unknown submission.
        Invalid: unknown run kind.
    """
    sub = session.get(Submission, submission_id)
    if sub is None:
        raise NotFound(f"no submission {submission_id}")
    if kind not in RUN_KINDS:
        raise Invalid(f"unknown run kind {kind!r}")
    if sub.status == SubmissionStatus.cancelled:
        raise Conflict(f"submission {submission_id} was cancelled; its {kind} result is ignored")
    if sub.status in FINAL_STATUSES:  # e.g. ended by the sweeper: a late result changes nothing
        return False
    if attempt is not None and int(attempt) != sub.attempt:  # the job of an earlier attempt
        return False
    if session.scalar(select(Run.id).where(Run.submission_id == submission_id, Run.attempt == sub.attempt,
                                           Run.kind == kind)) is not None:
        return False
    logs = result.pop("logs", {}) or {}
    samples = result.pop("samples", None)  # kept apart: pages and the API never load them (bundles.py)
    text = "".join(f"--- {k} ---\n{v}\n" for k, v in logs.items() if v)[:LOG_LIMIT]
    status = str(result.get("status"))
    if status not in VERDICTS:  # a runner's report is data: an unknown verdict is the judge's error
        status = Verdict.error.value
        result["message"] = f"the runner reported an unknown verdict {str(result.get('status'))[:64]!r}"
    _attach_ceilings(session, sub, result, runner)
    score = result.get("score_ns")
    run = Run(submission_id=submission_id, kind=kind, attempt=sub.attempt, status=status,
              score_ns=score if isinstance(score, (int, float)) and math.isfinite(score) else None,
              result=result, logs=text, runner=runner[:255])
    try:
        with session.begin_nested():
            session.add(run)
    except IntegrityError:  # a concurrent duplicate won the race
        return False
    session.flush()
    bundles.store_samples(session, run, samples)
    if again is not None and backoff is None:
        from kernelrank.settings import get_settings

        settings = get_settings()
        backoff = judgement.Backoff(settings.remeasure_delay_seconds, settings.remeasure_backoff)
    _finish_if_complete(session, sub, remeasures=remeasures if again is not None else 0,
                        backoff=backoff or judgement.Backoff(), notify=again is not None)
    if again is not None and sub.status == SubmissionStatus.queued and sub.remeasure_at is None:  # measured again now
        again(*current_job(sub))
    return True


def _attach_ceilings(session: Session, sub: Submission, result: dict[str, Any], runner: str) -> None:
    """The ceilings of the runner that ran it (its own in the result, else those of its
    last heartbeat) and each benchmark case's roofline share, stored with the result
    (:func:`kernelrank.roofline.attach`); the problem's output dtype picks the matmul ceiling
    when a case names no dtype."""
    from kernelrank import roofline
    from kernelrank.services.runners import ceilings_of

    contract = (sub.problem_revision.definition or {}).get("contract") or {}
    dtype = (contract.get("output") or {}).get("dtype")
    roofline.attach(result, result.get("ceilings") or ceilings_of(session, runner),
                    dtype if isinstance(dtype, str) else None)
    floor = roofline.beyond_floor(result, device_class(sub.device))
    if floor is not None and result.get("status") == Verdict.passed:  # held: faster than the hardware allows
        result["needs_review"], result["review_reason"] = True, floor


def headline_case(result: dict[str, Any]) -> dict[str, Any] | None:
    """The headline case of a stored run result (``EvalResult.to_dict()``): its first benchmark
    case, whose ``tflops`` and ``gbps`` a leaderboard shows; ``None`` without one."""
    for case in result.get("cases") or []:
        if isinstance(case, dict) and case.get("kind") == CaseKind.benchmark and case.get("index") == 0:
            return case
    return None


def _finish_if_complete(session: Session, sub: Submission, new_run: bool = True, remeasures: int = 0,
                        review_cleared: bool = False, backoff: judgement.Backoff = judgement.Backoff(),
                        notify: bool = False) -> None:
    """Set the verdict once every expected run of the current attempt is in; ``new_run``: a run
    was just recorded (it may then add to the board's calibration, once). The verdict, speedup,
    rank and score are :func:`kernelrank.judgement.judge`'s over every measurement that counts
    (attempts ``measured_from`` on); a submission it measures again is ``queued`` as a new
    attempt, held for ``backoff``'s wait; one it gives up on is marked for the admins when
    ``notify`` (the control worker's record, which measures again) or already so marked; a ranked
    score is re-based on the board's calibration."""
    session.expire(sub, ["runs"])  # the run just added is in the table, not yet in the loaded list
    counted = sorted(sub.counted_runs, key=lambda r: (r.attempt, r.id))
    latest = {r.kind for r in counted if r.attempt == sub.attempt}
    if not all(k in latest for k in run_kinds(sub.mode)):
        sub.status = SubmissionStatus.running.value if sub.status not in FINAL_STATUSES else sub.status
        return
    by_attempt: dict[int, list[RunRecord]] = {}
    for r in counted:
        by_attempt.setdefault(r.attempt, []).append(RunRecord(r.kind, r.status, r.result, r.score_ns))
    measurements = [m for _a, m in sorted(by_attempt.items())]
    leaderboard = sub.mode == Mode.leaderboard
    board = (calibration.board_spread(session, sub.problem_revision_id, sub.device, exclude_id=sub.id)
             if leaderboard and not judgement.failing_runs(measurements) else None)
    judged = judgement.judge(measurements, mode=sub.mode, noisy_above=_noisy_above(sub), board=board,
                             may_rank=sub.disqualified_at is None and takes_ranked(sub.problem_revision.problem,
                                                                                   sub.created_at),
                             remeasures=remeasures, review_cleared=review_cleared)
    public = next(r for r in measurements[-1] if r.kind == RunKind.public)
    head = headline_case(public.result) or {}
    sub.status, sub.message = judged.status, judged.message
    sub.tflops, sub.gbps = head.get("tflops"), head.get("gbps")
    sub.needs_review, sub.review_reason = judged.needs_review, judged.review_reason
    sub.runs_spread = judged.spread
    sub.speedup, sub.speedup_low, sub.speedup_high = judged.speedup, judged.speedup_low, judged.speedup_high
    sub.ranked = judged.ranked
    sub.score_ns, sub.score_low_ns, sub.score_high_ns = judged.score_ns, judged.score_low_ns, judged.score_high_ns
    if leaderboard and not judged.failed:
        cal, changed = (calibration.contribute(session, sub.problem_revision_id, sub.device, public.result)
                        if new_run else (calibration.get(session, sub.problem_revision_id, sub.device), False))
        if sub.ranked:
            calibration.apply(sub, cal)
        if changed and cal is not None:
            calibration.rescale(session, cal)
    if judged.again:
        _measure_again(sub, judged, backoff, remeasures)
        return
    if judged.gave_up and (notify or sub.too_noisy_at is not None):
        remeasure.tell_admins(sub, judged.message)
    elif not judged.gave_up:
        sub.too_noisy_at = None
    sub.finished_at = utcnow()  # the advisory scan, if not made yet, follows the commit (guard.store)


def _noisy_above(sub: Submission) -> float:
    """The problem's ``noisy_above`` for the submission's device class (infinite when the
    definition has no timing for it)."""
    try:
        return definition(sub.problem_revision).timing[device_class(sub.device)].noisy_above
    except (KeyError, ValueError):
        return math.inf


def _measure_again(sub: Submission, judged: judgement.Judgement, backoff: judgement.Backoff, remeasures: int) -> None:
    """Queue a passing leaderboard submission's next measurement: a new attempt whose runs count
    with the earlier ones (``measured_from`` stays), not ranked until it is in, its job held for
    ``backoff``'s wait (:func:`kernelrank.services.remeasure.defer`); the message says why, when,
    and which of how many measurements it is."""
    made = sub.measurements
    wait = backoff.delay_s(made)
    now = utcnow()
    due = now + dt.timedelta(seconds=wait)
    _new_attempt(sub, remeasure.waiting_message(made + 1, remeasures + 1, wait, due,
                                                judged.unquiet or "a run was too noisy to rank"))
    remeasure.defer(sub, wait, now)


def get_submission(session: Session, submission_id: int) -> Submission:
    """Raises: NotFound."""
    sub = session.get(Submission, submission_id)
    if sub is None:
        raise NotFound(f"no submission {submission_id}")
    return sub


def get_visible_submission(session: Session, submission_id: int, viewer: User | None) -> Submission:
    """A submission as ``viewer`` may read it: a hidden problem's submissions exist only for
    their owners and admins.

    Raises:
        NotFound: no such submission, or one of a hidden problem that ``viewer`` does not own.
    """
    sub = get_submission(session, submission_id)
    if sub.problem_revision.problem.hidden and not can_see_code(viewer, sub):
        raise NotFound(f"no submission {submission_id}")
    return sub


def cancel_submission(session: Session, viewer: User, submission_id: int) -> Submission:
    """Cancel a ``queued`` submission: it becomes ``cancelled`` (a final status) and no longer
    counts against its owner's limits. A runner that takes the job afterwards may still run it,
    but the go-ahead refuses it (:func:`kernelrank.services.jobs.start_job`: the status is
    final) and its reports are dropped (:func:`mark_started` and :func:`record_run`).

    The status changes only if it is still ``queued`` at the moment of the update, so a runner's
    ``job_started`` arriving at the same time cannot be overwritten.

    Raises:
        NotFound: no such submission.
        Forbidden: ``viewer`` is neither its owner nor an admin.
        Conflict: it is no longer queued (running or finished).
    """
    from sqlalchemy import update

    sub = get_submission(session, submission_id)
    require_owner(viewer, sub)
    done = session.execute(
        update(Submission).where(Submission.id == submission_id, Submission.status == SubmissionStatus.queued.value)
        .values(status=SubmissionStatus.cancelled.value, finished_at=utcnow(), message=f"cancelled by {viewer.name}")
        .execution_options(synchronize_session=False)
    ).rowcount
    session.refresh(sub)
    if not done:
        raise Conflict(f"submission {submission_id} is {sub.status}; only a queued submission can be cancelled")
    return sub


def can_see_code(viewer: User | None, sub: Submission) -> bool:
    """Code and logs are the owner's and admins' only."""
    return viewer is not None and (viewer.is_admin or viewer.id == sub.user_id)


def require_owner(viewer: User, sub: Submission) -> None:
    """Raises: Forbidden unless ``viewer`` owns ``sub`` or is an admin."""
    if not can_see_code(viewer, sub):
        raise Forbidden("only the owner or an admin may do that")


def _user_filter(user: User, problem: str | None, device_queue: str | None, status: str | None,
                 disqualified: bool | None):
    from kernelrank.db.models import Problem, ProblemRevision

    q = select(Submission).where(Submission.user_id == user.id)
    if problem:
        q = q.join(ProblemRevision, ProblemRevision.id == Submission.problem_revision_id).join(Problem).where(
            Problem.name == problem)
    if device_queue:
        q = q.where(Submission.device == device_queue)
    if status:
        q = q.where(Submission.status == status)
    if disqualified is not None:
        q = q.where(Submission.disqualified_at.is_not(None) if disqualified else Submission.disqualified_at.is_(None))
    return q


def list_for_user(session: Session, user: User, problem: str | None = None, device_queue: str | None = None,
                  status: str | None = None, limit: int = 50, offset: int = 0,
                  disqualified: bool | None = None) -> list[Submission]:
    """"My submissions": ``user``'s submissions, newest first, optionally filtered by problem name,
    device queue, verdict (``status``) and disqualification."""
    q = _user_filter(user, problem, device_queue, status, disqualified)
    return list(session.scalars(q.order_by(Submission.created_at.desc(), Submission.id.desc()).limit(limit).offset(offset)))



def count_for_user(session: Session, user: User, problem: str | None = None, device_queue: str | None = None,
                   status: str | None = None, disqualified: bool | None = None) -> int:
    """How many submissions :func:`list_for_user` would list without ``limit``/``offset`` (for paging)."""
    from sqlalchemy import func

    q = _user_filter(user, problem, device_queue, status, disqualified)
    return session.scalar(select(func.count()).select_from(q.subquery())) or 0


def queued_counts(session: Session) -> dict[str, int]:
    """Submissions waiting (queued) per device: the queue depth users see."""
    from sqlalchemy import func

    queued = Submission.status == SubmissionStatus.queued.value
    rows = session.execute(select(Submission.device, func.count()).where(queued)
                           .group_by(Submission.device))
    return {d: n for d, n in rows}


# -- moderation (admins) --------------------------------------------------------------------------
def disqualify(session: Session, admin: User, submission_id: int, reason: str) -> Submission:
    """Take a submission out of the ranking for good, with a ``reason`` shown to its author and
    admins. Disqualifying again replaces the reason.

    Raises:
        NotFound: no such submission.
        Invalid: an empty reason, or one over 2000 characters.
    """
    reason = reason.strip()
    if not reason:
        raise Invalid("give a reason: the author sees it")
    if len(reason) > 2000:
        raise Invalid("the reason is at most 2000 characters")
    sub = get_submission(session, submission_id)
    sub.disqualified_at = sub.disqualified_at or utcnow()
    sub.disqualified_reason = reason
    sub.disqualified_by_id = admin.id
    sub.ranked = False
    session.flush()
    return sub


def clear_review(session: Session, submission_id: int) -> Submission:
    """An admin looked at a submission marked for review (a speedup beyond its problem's
    ``review_speedup``) and found it sound: the mark leaves the leaderboard.

    Raises:
        NotFound: unknown submission. Conflict: the submission is not marked for review.
    """
    sub = get_submission(session, submission_id)
    if not sub.needs_review:
        raise Conflict(f"submission {submission_id} is not marked for review")
    if (sub.review_reason or "").startswith(FLOOR_REASON):  # held unranked: judged again, ranked if earned
        finished = sub.finished_at
        _finish_if_complete(session, sub, new_run=False, review_cleared=True)
        sub.finished_at = finished or sub.finished_at
    sub.needs_review, sub.review_reason = False, None
    return sub


def reinstate(session: Session, submission_id: int) -> Submission:
    """Undo :func:`disqualify`: the submission is ranked again if its runs earn it.

    Raises:
        NotFound: no such submission.
    """
    sub = get_submission(session, submission_id)
    sub.disqualified_at = sub.disqualified_reason = sub.disqualified_by_id = None
    session.flush()
    if sub.status in FINAL_STATUSES:
        _finish_if_complete(session, sub, new_run=False)
    return sub


def requeue(session: Session, submission_id: int, dispatch: Dispatch, force: bool = False) -> Submission:
    """Judge a submission again: a new attempt on the same revision, device and mode, its job
    dispatched like a new submission's. Runs of earlier attempts stay stored as history and are
    never counted; until the new runs are in, the submission is ``queued`` and not ranked.

    Runners send the attempt their job was for with every report, so a late report of the earlier
    attempt's job (a runner still working on it) is dropped (:func:`record_run`,
    :func:`kernelrank.services.jobs.start_job`).

    Raises:
        NotFound: no such submission.
        Conflict: the submission is still queued or running and ``force`` is false.
    """
    sub = get_submission(session, submission_id)
    if sub.status not in FINAL_STATUSES and not force:
        raise Conflict(f"submission {submission_id} is still {sub.status}; requeue it with force if its job is lost")
    _new_attempt(sub, "")
    remeasure.cleared(sub)
    sub.measured_from = sub.attempt  # judged afresh: the earlier attempts' runs are history
    sub.speedup = sub.speedup_low = sub.speedup_high = None
    sub.needs_review, sub.review_reason = False, None
    session.flush()
    dispatch(*current_job(sub))
    return sub
