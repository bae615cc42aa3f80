"""Latency from POST to verdict, and one CPU runner's throughput, for a small softmax ``test`` job.

Starts a real ``kernelrank serve`` (API, control worker, one CPU runner) in a temp folder, on its
embedded default (SQLite, file broker) or, with ``--database-url`` and ``--broker-url``, on
Postgres and Redis (e.g. those of ``scripts/test-servers.sh``; a new database and key prefix
there, dropped at the end). Then:

1. latency: ``--jobs`` submissions one after the other; for each, the time from sending the POST to
   reading a final status (following it as the CLI does: each read waits on the server for the
   next change of its state, ``If-None-Match`` and ``wait``; ``--poll-ms`` polls instead);
   prints p50 / p95 / max and the verdicts, then each hop's p50 / p95: the POST (the job is queued
   before its answer), the queue to the runner, the runner's preparing, the judging (its child's
   start, the load, the tests), the go-ahead (asked beside the judging: only what it adds after
   the judging is on the path), the result to its record, the record to the client. The runner's
   times are the result's ``hops`` (wall clock, the same machine); the record's is ``finished_at``;
2. throughput: ``--jobs`` submissions sent at once; jobs per minute from the first POST to the
   last verdict (one runner, one job at a time).

Prints figures, asserts nothing (current figures: bench/README.md). Targets on a 2-core machine at
idle: p50 at most 300 ms (p95 600 ms) on the embedded default, 150 ms on Postgres + Redis, which
needs the runner's warm start (``runner/submission/zygote.py``; ``--cold`` turns it off to compare).

Usage: ``python bench/latency.py [--jobs 50] [--cold] [--poll-ms MS] [--database-url URL --broker-url URL]``
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.service import API, ROOT, embedded_service, follow, machine, percentiles  # noqa: E402
from tests.servers import new_backend  # noqa: E402

KERNEL = ROOT / "reference_kernels" / "softmax" / "examples" / "correct_pytorch.py"
#: Seconds between reads when polling (``--poll-ms``); 0: long-polls (each read waits for a change).
POLL_S = 0.0


def _submit(client: httpx.Client, code: str) -> int:
    r = client.post(f"{API}/submissions", json={"problem": "softmax", "device": "cpu", "mode": "test", "code": code})
    r.raise_for_status()
    return int(r.json()["id"])


def _wait(client: httpx.Client, sid: int, timeout_s: float = 300.0) -> str:
    return str(follow(client, sid, timeout_s, POLL_S).get("status", "lost"))


def _epoch(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp).timestamp()


#: Each hop: its name and how to compute it (s) from the client's times and the runner's ``hops``.
HOPS = (
    ("POST answered (job queued)", lambda c, h: c["answered"] - c["post"]),
    ("queue to the runner", lambda c, h: h["received"] - c["answered"]),
    ("runner prepares (sweep, zygote)", lambda c, h: h["judging"] - h["received"]),
    ("judging: child start", lambda c, h: h["phases"]["compile"] - h["judging"]),
    ("judging: load", lambda c, h: h["phases"]["test"] - h["phases"]["compile"]),
    ("judging: tests, close", lambda c, h: h["judged"] - h["phases"]["test"]),
    ("go-ahead (beside the judging)", lambda c, h: h["answered"] - h["asked"]),
    ("judged to sent (go-ahead's wait)", lambda c, h: h["sent"] - h["judged"]),
    ("result sent to recorded", lambda c, h: c["recorded"] - h["sent"]),
    ("recorded to seen by the client", lambda c, h: c["seen"] - c["recorded"]),
)


def latency(client: httpx.Client, code: str, jobs: int) -> None:
    samples, verdicts = [], collections.Counter()
    hops: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(jobs):
        t0, c = time.perf_counter(), {"post": time.time()}
        sid = _submit(client, code)
        c["answered"] = time.time()
        sub = follow(client, sid, poll_s=POLL_S)
        c["seen"] = time.time()
        samples.append(time.perf_counter() - t0)
        verdicts[sub.get("status", "lost")] += 1
        runner = ((sub.get("runs") or [{}])[0].get("result") or {}).get("hops")
        if not runner or not sub.get("finished_at"):
            continue
        c["recorded"] = _epoch(sub["finished_at"])
        for name, hop in HOPS:
            try:
                hops[name].append(hop(c, runner))
            except (KeyError, TypeError):  # a result without phases (an error before the child)
                pass
    p = percentiles(samples, (50, 95))
    print(f"1. POST to verdict, {jobs} sequential test-mode jobs: p50 {p[50]:.0f} ms, p95 {p[95]:.0f} ms, "
          f"max {max(samples) * 1000:.0f} ms; verdicts {dict(verdicts)}   (target p50 <= 300 ms embedded, "
          f"<= 150 ms Postgres + Redis)")
    for name, _ in HOPS:
        if hops[name]:
            q = percentiles(hops[name], (50, 95))
            print(f"   {name:<36} p50 {q[50]:7.1f} ms   p95 {q[95]:7.1f} ms")


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
    ap.add_argument("--poll-ms", type=float, default=0.0,
                    help="read the submission every this many ms instead of long-polling (before 2026-12-03: 20)")
    ap.add_argument("--database-url", default=None)
    ap.add_argument("--broker-url", default=None)
    args = ap.parse_args()
    global POLL_S
    POLL_S = args.poll_ms / 1000
    if bool(args.database_url) != bool(args.broker_url):
        ap.error("--database-url and --broker-url go together (the test servers': scripts/test-servers.sh)")
    settings = {"rate_submissions_per_hour": "0", "rate_concurrent_jobs": "0",
                "runner_warm_start": "false" if args.cold else "true"}
    backend = "Postgres + Redis" if args.database_url else "embedded default (SQLite, file broker)"
    print(f"machine: {machine()}")
    print(f"service: {backend}; warm start {'off' if args.cold else 'on'}; client "
          + (f"polls every {args.poll_ms:g} ms" if POLL_S else "long-polls (If-None-Match, wait)"))
    code = KERNEL.read_text()
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="kernelrank-latency-"))
        if args.database_url:
            # a database and key prefix of its own: a used one has its admin already (serve prints no token)
            real = stack.enter_context(new_backend(args.database_url, args.broker_url))
            settings.update(database_url=real.database_url, broker_url=real.broker_url, broker_key_prefix=real.key_prefix)
        with embedded_service(Path(tmp), **settings) as svc:
            with httpx.Client(base_url=svc.url, headers={"Authorization": f"Bearer {svc.admin_token}"},
                              timeout=30) as client:
                _wait(client, _submit(client, code))  # first job: the zygote's start, caches
                latency(client, code, args.jobs)
                throughput(client, code, args.jobs)
    print(f"machine after: {machine()}")


if __name__ == "__main__":
    main()
