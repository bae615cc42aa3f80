"""A score's reproducibility bundle: one JSON document with what produced a submission's numbers.

What it holds (``GET /api/v1/submissions/{id}/bundle``, and one per row of ``kernelrank export``):

- ``submission``: the code's SHA-256 (the code itself only where :func:`~kernelrank.services.submissions.can_see_code`
  allows), problem, revision, device queue, mode, verdict, speedup and score with their 95%
  intervals, attempts;
- ``problem``: its cases (their public seeds among their parameters), tolerances and timing
  budgets for the device, from the revision that judged it;
- ``seeds``: the cases' public seeds, and the revision's secret seed once the problem is closed
  (its deadline passed) or to admins (``secret_seed`` null and ``secret_seed_shown`` false
  otherwise); a secret run's inputs come from it by
  :func:`kernelrank.runner.judge.answers.mix_seed` (BLAKE2b of ``secret:seed:iteration``);
- ``runs``: per counted run, its runner, the device it reported (model, driver, torch, Triton and
  Python versions), the ceilings its roofline shares used, its isolation, its interval, and per
  benchmark case the timing figures and the judged samples (``samples``: per counted pair the
  submission's and the reference's request times in ns, and which pair of processes timed it);
- ``runners``: each of those runners as its last heartbeat described it (clocks where known, its
  self-test);
- ``recompute``: how the numbers follow from the samples with :mod:`kernelrank.runner.stats`.

Samples are stored apart from results (:class:`~kernelrank.db.models.RunSamples`), bounded by
:data:`SAMPLES_LIMIT` numbers per run (a run over it keeps none, and its bundle says so).
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy.orm import Session

from kernelrank.db.models import Run, Runner, RunSamples, Submission, User
from kernelrank.vocab import CaseKind, RunKind, device_class

#: The bundle's format; a change of its shape increments it.
BUNDLE_FORMAT = 1
#: Most numbers (request times and groups together) kept of one run's samples.
SAMPLES_LIMIT = 600_000
#: How the figures follow from the samples (shown in every bundle).
RECOMPUTE = (
    "per case: stats.paired_speedup(reference_ns, submission_ns, groups=groups) is its speedup and 95% interval; "
    "per run: stats.combine(case intervals, [stats.group_means(reference_ns, submission_ns, groups) where groups]) "
    "is the run's speedup (the geometric mean over cases); per submission: stats.combine_runs(run intervals, "
    "board spread) combines its counted runs; the score is stats.time_from_speedup(basis_ns, speedup) with basis_ns "
    "the geometric mean of the cases' reference_ns (the board's calibration, or the run's own reference)")


def clean_samples(raw: Any) -> list[dict[str, Any]] | None:
    """A runner's ``samples`` (a list of ``{case, submission_ns, reference_ns, groups}``) as
    stored, or ``None`` when they are not of that shape, hold a time that is not a positive finite
    number, or exceed :data:`SAMPLES_LIMIT` numbers: a runner's report is data, checked."""
    if not isinstance(raw, list):
        return None
    cleaned, numbers = [], 0
    for case in raw:
        if not isinstance(case, dict) or not isinstance(case.get("case"), int):
            return None
        sub, ref, groups = case.get("submission_ns"), case.get("reference_ns"), case.get("groups")
        if not isinstance(sub, list) or not isinstance(ref, list) or len(sub) != len(ref):
            return None
        if groups is not None and (not isinstance(groups, list) or len(groups) != len(sub)
                                   or not all(isinstance(g, int) for g in groups)):
            return None
        times = [*sub, *ref]
        if not all(isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t > 0
                   for t in times):
            return None
        numbers += len(times) + (len(groups) if groups else 0)
        if numbers > SAMPLES_LIMIT:
            return None
        cleaned.append({"case": case["case"], "submission_ns": sub, "reference_ns": ref, "groups": groups})
    return cleaned


def store_samples(session: Session, run: Run, raw: Any) -> None:
    """Keep a run's samples (:func:`clean_samples`) beside it; nothing when there are none or
    they are not valid (the run's result says so in its bundle)."""
    cases = clean_samples(raw)
    if cases:
        session.add(RunSamples(run_id=run.id, cases=cases))


def iso(value: Any) -> str | None:
    """A datetime as ISO 8601 text, or ``None``."""
    return value.isoformat() if value is not None else None


def _seeds(cases: list[dict[str, Any]]) -> list[Any]:
    return [c.get("seed") for c in cases]


def _run_entry(session: Session, run: Run) -> dict[str, Any]:
    result = run.result or {}
    stored = session.get(RunSamples, run.id)
    by_case = {c["case"]: c for c in (stored.cases if stored is not None else [])}
    benchmarks = [c for c in result.get("cases") or [] if isinstance(c, dict) and c.get("kind") == CaseKind.benchmark]
    cases = []
    for i, case in enumerate(benchmarks):
        samples = by_case.get(i)
        cases.append({
            "index": case.get("index"), "spec": case.get("spec"), "speedup": case.get("speedup"),
            "speedup_ci": case.get("speedup_ci"), "time_ns": case.get("time_ns"), "time_ci_ns": case.get("time_ci_ns"),
            "reference_ns": case.get("reference_ns"), "timing": case.get("timing"), "ref_timing": case.get("ref_timing"),
            "pairing": case.get("pairing"), "roofline": case.get("roofline"),
            "samples": None if samples is None else {k: samples[k] for k in ("submission_ns", "reference_ns", "groups")},
        })
    return {
        "kind": run.kind, "attempt": run.attempt, "status": run.status, "runner": run.runner,
        "recorded_at": iso(run.created_at), "speedup": result.get("speedup"), "speedup_ci": result.get("speedup_ci"),
        "speedup_interval": result.get("speedup_interval"), "score_ns": result.get("score_ns"),
        "score_ci_ns": result.get("score_ci_ns"), "basis": result.get("basis"), "noisy": result.get("noisy"),
        "device_info": result.get("device_info"), "ceilings": result.get("ceilings"),
        "isolation": result.get("isolation"), "samples_kept": stored is not None, "cases": cases,
    }


def bundle(session: Session, sub: Submission, viewer: User | None) -> dict[str, Any]:
    """The bundle of ``sub`` as ``viewer`` may read it (see the module docstring); the caller has
    checked that ``viewer`` may see the submission at all."""
    from kernelrank.services import problems
    from kernelrank.services.submissions import can_see_code

    rev = sub.problem_revision
    d = rev.definition or {}
    board_class = device_class(sub.device)
    closed = problems.state_of(rev.problem) == "closed"
    show_secret = closed or bool(viewer is not None and viewer.is_admin)
    runs = [r for r in sub.counted_runs if r.kind in (RunKind.public, RunKind.secret)]
    names = sorted({r.runner for r in runs if r.runner})
    runners = {row.name: {"device": row.device, "version": row.version, "info": row.info,
                          "last_heartbeat": iso(row.last_heartbeat)}
               for row in session.query(Runner).filter(Runner.name.in_(names))} if names else {}
    tests = list(d.get("tests") or [])
    benchmarks = list((d.get("benchmarks") or {}).get(board_class) or [])
    return {
        "format": BUNDLE_FORMAT,
        "submission": {
            "id": sub.id, "user": sub.user.name, "problem": rev.problem.name, "revision": rev.revision,
            "device": sub.device, "mode": sub.mode, "language": sub.language, "filename": sub.filename,
            "code_sha256": sub.code_sha256, "code": sub.code if can_see_code(viewer, sub) else None,
            "status": sub.status, "ranked": bool(sub.ranked), "speedup": sub.speedup,
            "speedup_ci": [sub.speedup_low, sub.speedup_high] if sub.speedup_low is not None else None,
            "score_ns": sub.score_ns,
            "score_ci_ns": [sub.score_low_ns, sub.score_high_ns] if sub.score_low_ns is not None else None,
            "runs_spread": sub.runs_spread, "attempt": sub.attempt, "measured_from": sub.measured_from,
            "created_at": iso(sub.created_at), "finished_at": iso(sub.finished_at),
        },
        "problem": {"name": rev.problem.name, "revision": rev.revision, "tests": tests, "benchmarks": benchmarks,
                    "tolerances": d.get("tolerances"), "timing": (d.get("timing") or {}).get(board_class),
                    "state": problems.state_of(rev.problem)},
        "seeds": {"tests": _seeds(tests), "benchmarks": _seeds(benchmarks),
                  "secret_seed": rev.secret_seed if show_secret else None, "secret_seed_shown": show_secret,
                  "secret_derivation": "kernelrank.runner.judge.answers.mix_seed(secret_seed, case seed, iteration)"},
        "runs": [_run_entry(session, r) for r in runs],
        "runners": runners,
        "recompute": RECOMPUTE,
    }
