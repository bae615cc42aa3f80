"""A submission's state in one short tag, for conditional and long-polled reads
(``GET /api/v1/submissions/{id}`` with ``If-None-Match`` and ``wait``: :mod:`kernelrank.api.watch`).

The tag covers what changes while a job lives and after: status, message, progress, attempt,
start and finish, score, ranking, review, disqualification and a measurement's back-off. It
does not cover the place in a device queue (computed per read): a waiting client learns that
when its wait ends.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelrank.db.models import Submission

#: The columns the tag is made of, in order.
STATE_COLUMNS = (Submission.status, Submission.message, Submission.progress, Submission.attempt,
                 Submission.started_at, Submission.finished_at, Submission.score_ns, Submission.ranked,
                 Submission.needs_review, Submission.disqualified_at, Submission.remeasure_at)
_NAMES = tuple(c.key for c in STATE_COLUMNS)


def tag_of(values: Sequence[Any]) -> str:
    """The tag (16 hex digits, BLAKE2b) of a submission's :data:`STATE_COLUMNS` values, in order.
    Times are taken as their ISO text, so a naive SQLite time and its aware twin differ: tags
    are compared only within one database."""
    text = json.dumps(list(values), default=str, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def state_tag(sub: Submission) -> str:
    """The tag of a loaded submission (:func:`tag_of`)."""
    return tag_of([getattr(sub, name) for name in _NAMES])


def state_tags(session: Session, ids: Iterable[int]) -> dict[int, str]:
    """The tags of the submissions ``ids`` that exist, by id, in one query."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = session.execute(select(Submission.id, *STATE_COLUMNS).where(Submission.id.in_(wanted)))
    return {row[0]: tag_of(row[1:]) for row in rows}
