"""Export the ranked submissions of a problem for the people who run a competition: one row per
ranked submission (every revision, every device), with its results, revision, device and the
kernelguard signal, and its reproducibility bundle (:mod:`kernelrank.services.bundles`, as an
anonymous reader gets it: the secret seed once the problem is closed); its code only where the
problem is marked ``code_open`` (:func:`set_code_open`). Written as JSON Lines (:func:`write_jsonl`) or Parquet
(:func:`write_parquet`, needs ``pyarrow``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from kernelrank.db.models import Problem, ProblemRevision, Submission
from kernelrank.services import Invalid, bundles
from kernelrank.services.problems import get_problem
from kernelrank.vocab import RunKind

Format = Literal["jsonl", "parquet"]
FORMATS: tuple[Format, ...] = ("jsonl", "parquet")
#: Columns of an export, in order (``code`` is null unless the problem's code is open).
COLUMNS = ("problem", "revision", "current_revision", "device", "place", "user", "submission_id", "score_ns",
           "speedup", "tflops", "gbps", "language", "filename", "code_sha256", "code", "created_at",
           "finished_at", "runner", "needs_review", "review_reason", "guard", "results", "bundle")


def set_code_open(session: Session, name: str, code_open: bool = True) -> Problem:
    """Mark problem ``name``'s submitted code as published in exports (or not).

    Raises:
        NotFound: unknown problem.
    """
    problem = get_problem(session, name, include_hidden=True)
    problem.code_open = code_open
    return problem


def ranked_rows(session: Session, name: str, device_queue: str | None = None) -> list[dict[str, Any]]:
    """The ranked submissions of problem ``name`` (hidden ones too: exports are for admins), by
    revision, device, then score; ``place`` is the 1-based position on its board (revision x
    device) among all its ranked submissions. ``results`` is the public run's result of the
    current attempt (without logs), ``guard`` the kernelguard signal, ``bundle`` its reproducibility
    bundle as an anonymous reader gets it.

    Raises:
        NotFound: unknown problem.
    """
    problem = get_problem(session, name, include_hidden=True)
    q = (select(Submission).join(ProblemRevision, Submission.problem_revision_id == ProblemRevision.id)
         .where(ProblemRevision.problem_id == problem.id, Submission.ranked)
         .options(selectinload(Submission.runs), selectinload(Submission.user),
                  selectinload(Submission.problem_revision))
         .order_by(ProblemRevision.id, Submission.device, Submission.score_ns, Submission.created_at, Submission.id))
    if device_queue is not None:
        q = q.where(Submission.device == device_queue)
    rows: list[dict[str, Any]] = []
    places: dict[tuple[int, str], int] = {}
    for sub in session.scalars(q):
        board = (sub.problem_revision_id, sub.device)
        places[board] = places.get(board, 0) + 1
        public = next((r for r in sub.current_runs if r.kind == RunKind.public), None)
        rows.append({
            "problem": problem.name, "revision": sub.problem_revision.revision,
            "current_revision": bool(sub.problem_revision.is_current), "device": sub.device, "place": places[board],
            "user": sub.user.name, "submission_id": sub.id, "score_ns": sub.score_ns, "speedup": sub.speedup,
            "tflops": sub.tflops, "gbps": sub.gbps, "language": sub.language, "filename": sub.filename,
            "code_sha256": sub.code_sha256, "code": sub.code if problem.code_open else None,
            "created_at": bundles.iso(sub.created_at), "finished_at": bundles.iso(sub.finished_at), "runner": sub.runner,
            "needs_review": bool(sub.needs_review), "review_reason": sub.review_reason, "guard": sub.guard,
            "results": {k: v for k, v in (public.result or {}).items() if k != "logs"} if public else None,
            "bundle": bundles.bundle(session, sub, None),
        })
    return rows


def write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    """One JSON object per line, columns in :data:`COLUMNS` order."""
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps({k: row.get(k) for k in COLUMNS}, allow_nan=False, default=str) + "\n")


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    """A Parquet file with :data:`COLUMNS`; ``guard``, ``results`` and ``bundle`` as JSON text (their shapes
    vary by problem and version).

    Raises:
        Invalid: ``pyarrow`` is not installed.
    """
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise Invalid("Parquet export needs pyarrow (pip install pyarrow), or use --format jsonl") from None
    types = {"place": pa.int64(), "submission_id": pa.int64(), "score_ns": pa.float64(), "speedup": pa.float64(),
             "tflops": pa.float64(), "gbps": pa.float64(), "current_revision": pa.bool_(),
             "needs_review": pa.bool_()}
    schema = pa.schema([(c, types.get(c, pa.string())) for c in COLUMNS])
    flat = [{k: (json.dumps(row.get(k), default=str) if k in ("guard", "results", "bundle") and row.get(k) is not None
                 else row.get(k)) for k in COLUMNS} for row in rows]
    pq.write_table(pa.Table.from_pylist(flat, schema=schema), path)


def write(rows: list[dict[str, Any]], path: Path, fmt: str) -> None:
    """Write ``rows`` to ``path`` as ``fmt`` (``jsonl`` or ``parquet``).

    Raises:
        Invalid: an unknown format, or Parquet without pyarrow.
    """
    if fmt == "jsonl":
        write_jsonl(rows, path)
    elif fmt == "parquet":
        write_parquet(rows, path)
    else:
        raise Invalid(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
