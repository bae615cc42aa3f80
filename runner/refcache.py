"""Cache of the reference's timings: the denominators of every speedup.

The reference is timed by the same harness as submissions, on the same device and in the same
mode; that costs a full timing run, so the figures are kept per problem revision, device
(model, threads, library versions), mode and case. A new revision, machine or library version is
a different key and is timed afresh. Files are JSON, written atomically; deleting them is safe.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


#: Bumped whenever how timings or overheads are measured changes: figures measured by another
#: version of the harness are not reused.
HARNESS_VERSION = 6


@dataclass(frozen=True)
class ReferenceTiming:
    """The reference's figures on one case (ns), which calibrate the judge-side timing of
    submissions (:func:`kernelrank.runner.harness.judged_times`).

    ``mean_ns``: mean claimed time per call. ``overhead_ns``: the 10th percentile over its timed
    calls of the judge's window less the claim. ``main_overhead_ns``: median over its timed calls of the CPU time the child's main thread
    used during the window less the claim.
    """

    mean_ns: float
    overhead_ns: float
    main_overhead_ns: float = 0.0


def case_key(params: dict[str, Any]) -> str:
    """A stable key for a case's parameters (seed included)."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


class ReferenceCache:
    """JSON files under ``root/reference/``, one per (revision, device key, mode)."""

    def __init__(self, root: Path):
        self.root = root / "reference"

    def _path(self, revision: str, device_key: str, mode: str) -> Path:
        digest = hashlib.sha256(f"{revision}|{device_key}|{mode}|{HARNESS_VERSION}".encode()).hexdigest()[:32]
        return self.root / f"{revision[:16]}-{mode}-{digest}.json"

    def load(self, revision: str, device_key: str, mode: str) -> dict[str, ReferenceTiming]:
        """Cached timings by :func:`case_key`; empty when nothing is cached or the file is unreadable."""
        try:
            raw = json.loads(self._path(revision, device_key, mode).read_text(encoding="utf-8"))
            return {k: ReferenceTiming(**v) for k, v in raw.items()}
        except (OSError, ValueError, TypeError):
            return {}

    def store(self, revision: str, device_key: str, mode: str, timings: dict[str, ReferenceTiming]) -> None:
        """Merge ``timings`` into the cached file (atomic replace)."""
        merged = self.load(revision, device_key, mode) | timings
        path = self._path(revision, device_key, mode)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({k: asdict(v) for k, v in merged.items()}, f)
        os.replace(tmp, path)
