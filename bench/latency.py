"""Latency from POST to verdict, and one CPU runner's throughput, for a small softmax ``test`` job.

Starts a real ``kernelrank serve`` (API, control worker, one CPU runner) in a temp folder, on its
embedded default (SQLite, file broker) or, with ``--database-url`` and ``--broker-url``, on
Postgres and Redis (e.g. those of ``scripts/test-servers.sh``). Then:

1. latency: ``--jobs`` submissions one after the other; for each, the time from sending the POST to
   reading a final status (polling the submission every 20 ms, as a page or client would);
   prints p50 / p95 / max and the verdicts;
2. throughput: ``--jobs`` submissions sent at once; jobs per minute from the first POST to the
   last verdict (one runner, one job at a time).

Prints figures, asserts nothing (current figures: bench/README.md). Target: p50 under 1 s on a
2-core machine, which needs the runner's warm start (``runner/submission/zygote.py``; ``--cold`` turns it off to compare).

Usage: ``python bench/latency.py [--jobs 50] [--cold] [--database-url URL --broker-url URL]``
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.service import API, ROOT, embedded_service, machine, percentiles  # noqa: E402
from kernelrank.vocab import FINAL_STATUSES  # noqa: E402

KERNEL = ROOT / "reference_kernels" / "softmax" / "examples" / "correct_pytorch.py"
POLL_S = 0.02


def _submit(client: httpx.Client, code: str) -> int:
    r = client.post(f"{API}/submissions", json={"problem": "softmax", "device": "cpu", "mode": "test", "code": code})
    r.raise_for_status()
    return int(r.json()["id"])


def _wait(client: httpx.Client, sid: int, timeout_s: float = 300.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = client.get(f"{API}/submissions/{sid}").json()["status"]
        if status in FINAL_STATUSES:
            return status
        time.sleep(POLL_S)
    return "lost"


def latency(client: httpx.Client, code: str, jobs: int) -> None:
    samples, verdicts = [], collections.Counter()
    for _ in range(jobs):
        t0 = time.perf_counter()
        verdicts[_wait(client, _submit(client, code))] += 1
        samples.append(time.perf_counter() - t0)
    p = percentiles(samples, (50, 95))
    print(f"1. POST to verdict, {jobs} sequential test-mode jobs: p50 {p[50]:.0f} ms, p95 {p[95]:.0f} ms, "
          f"max {max(samples) * 1000:.0f} ms; verdicts {dict(verdicts)}   (target p50 < 1000 ms)")


def throughput(client: httpx.Client, code: str, jobs: int) -> None:
    t0 = time.perf_counter()
    ids = [_submit(client, code) for _ in range(jobs)]
    verdicts = collections.Counter(_wait(client, sid, 1800.0) for sid in ids)
    wall = time.perf_counter() - t0
    print(f"2. throughput, {jobs} jobs sent at once to one CPU runner: {jobs / wall * 60:.1f} jobs/min "
          f"({wall:.1f} s); verdicts {dict(verdicts)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=50)
    ap.add_argument("--cold", action="store_true", help="start every child cold (no zygote)")
    ap.add_argument("--database-url", default=None)
    ap.add_argument("--broker-url", default=None)
    args = ap.parse_args()
    settings = {"rate_submissions_per_hour": "0", "rate_concurrent_jobs": "0",
                "runner_warm_start": "false" if args.cold else "true"}
    if args.database_url:
        settings["database_url"] = args.database_url
    if args.broker_url:
        settings["broker_url"] = args.broker_url
    backend = "Postgres + Redis" if args.database_url else "embedded default (SQLite, file broker)"
    print(f"machine: {machine()}")
    print(f"service: {backend}; warm start {'off' if args.cold else 'on'}")
    code = KERNEL.read_text()
    with tempfile.TemporaryDirectory(prefix="kernelrank-latency-") as tmp:
        with embedded_service(Path(tmp), **settings) as svc:
            with httpx.Client(base_url=svc.url, headers={"Authorization": f"Bearer {svc.admin_token}"},
                              timeout=30) as client:
                _wait(client, _submit(client, code))  # first job: the zygote's start, caches
                latency(client, code, args.jobs)
                throughput(client, code, args.jobs)
    print(f"machine after: {machine()}")


if __name__ == "__main__":
    main()
