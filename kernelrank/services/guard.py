"""The static hack detector ``kernelguard`` (PyPI; GPU MODE runs it before queueing) as an
advisory signal: each submission's code is scanned once, when its job starts (in the go-ahead,
beside the untimed start of a timed mode's judging) or else once its verdict is committed
(:func:`store`: a test job's, whose verdict would otherwise wait for it), and the result is stored
with it (``Submission.guard``) for admins, shown beside the speedup review mark.
It never rejects, ranks or un-ranks anything: a rule-based scan flags some honest kernels (it
marks one correct GEMM of the bundled examples as ``low_confidence``) and misses most attacks
that the harness catches at run time.

About 80 ms for an 8 KB Triton kernel, 2.6 s for a 256 KB file (the largest accepted), which
is why the scan runs in the control worker, not in the
request that takes the submission.
"""

from __future__ import annotations

from typing import Any

#: Matched patterns kept per submission (a flood of matches says nothing more).
MAX_PATTERNS = 20


def scan(code: str) -> dict[str, Any]:
    """The advisory signal for ``code``: ``{"tool": "kernelguard", "version", "classification"
    ("valid", "low_confidence", "hacked"...), "flagged" (kernelguard's own "would filter"),
    "patterns": [{"pattern", "severity", "evidence"}...], "reason"}``, or ``{"tool", "error"}`` when kernelguard
    is missing or fails (never raises)."""
    try:
        import importlib.metadata

        import kernelguard

        version = importlib.metadata.version("kernelguard")
        result = kernelguard.analyze_code(code, compute_structural_hash=False)
    except Exception as e:  # noqa: BLE001 - an advisory tool failing must not touch the verdict
        return {"tool": "kernelguard", "error": f"{type(e).__name__}: {e}"[:500]}
    patterns = []
    for m in (result.get("matched_patterns") or [])[:MAX_PATTERNS]:
        patterns.append({"pattern": str(m.get("pattern", "?")), "severity": str(m.get("severity", "")),
                         "evidence": str(m.get("evidence", ""))[:200]})
    return {"tool": "kernelguard", "version": version, "classification": str(result.get("classification", "")),
            "flagged": bool(result.get("should_filter")), "patterns": patterns,
            "reason": (str(result["filter_reason"])[:500] if result.get("filter_reason") else None)}


def summary(signal: dict[str, Any] | None) -> str:
    """One line for pages and tables: ``not scanned``, ``error: ...``, ``valid`` or
    ``low_confidence: DECODE_MM_REF, THREAD_INJECTION``."""
    if not signal:
        return "not scanned"
    if signal.get("error"):
        return f"error: {signal['error']}"
    names = sorted({p.get("pattern", "?") for p in signal.get("patterns") or []})
    return str(signal.get("classification") or "?") + (f": {', '.join(names)}" if names else "")


def store(session: Any, submission_id: int) -> bool:
    """Scan a finished submission's code and store the result, where no scan is stored yet
    (called after its verdict's commit: the verdict never waits for the scan); whether it did."""
    from kernelrank.db.models import Submission
    from kernelrank.vocab import FINAL_STATUSES

    sub = session.get(Submission, submission_id)
    if sub is None or sub.guard is not None or sub.status not in FINAL_STATUSES:
        return False
    sub.guard = scan(sub.code)
    return True
