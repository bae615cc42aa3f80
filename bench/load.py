"""Load: concurrent clients send test-mode submissions to a real ``kernelrank serve`` and wait for
their verdicts. Prints (never asserts): accepted / finished / lost / duplicated, verdicts, the
API's latency percentiles during the load (submissions and status polls, as the clients saw them),
and the total time.

Each client is its own user: it sends its share of the submissions back to back, then polls its
submission list once a second (as ``kernelrank submit`` polls) until every one has a verdict.
The per-user limits are lifted for the run (``--keep-limits`` keeps the defaults).

Usage: ``python bench/load.py [--clients 20] [--submissions 200] [--timeout 3600] [--keep-limits]``
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.service import API, ROOT, describe, embedded_service, machine  # noqa: E402
from kernelrank.vocab import FINAL_STATUSES  # noqa: E402

KERNEL = ROOT / "reference_kernels" / "softmax" / "examples" / "correct_pytorch.py"


class Tally:
    """Everything the clients saw."""

    def __init__(self) -> None:
        self.post_s: list[float] = []
        self.get_s: list[float] = []
        self.refused: collections.Counter[int] = collections.Counter()
        self.accepted: list[int] = []
        self.final: dict[int, str] = {}
        self.errors: list[str] = []


async def client(url: str, token: str, n: int, code: bytes, tally: Tally, start: asyncio.Event,
                 deadline: float) -> None:
    """Send ``n`` submissions, then poll until each has a final status or the deadline passes."""
    mine: set[int] = set()
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        await start.wait()
        for _ in range(n):
            t0 = time.perf_counter()
            try:
                r = await http.post(f"{API}/submissions", data={"problem": "softmax", "device": "cpu", "mode": "test"},
                                    files={"file": ("kernel.py", code, "text/x-python")})
            except httpx.HTTPError as e:
                tally.errors.append(f"POST: {type(e).__name__}")
                continue
            tally.post_s.append(time.perf_counter() - t0)
            if r.status_code == 202:
                sid = r.json()["id"]
                mine.add(sid)
                tally.accepted.append(sid)
            else:
                tally.refused[r.status_code] += 1
        pending = set(mine)
        while pending and time.monotonic() < deadline:
            await asyncio.sleep(1.0)
            t0 = time.perf_counter()
            try:
                r = await http.get(f"{API}/submissions", params={"limit": 200})
            except httpx.HTTPError as e:
                tally.errors.append(f"GET: {type(e).__name__}")
                continue
            tally.get_s.append(time.perf_counter() - t0)
            if r.status_code != 200:
                tally.errors.append(f"GET: HTTP {r.status_code}")
                continue
            for sub in r.json():
                if sub["id"] in pending and sub["status"] in FINAL_STATUSES:
                    tally.final[sub["id"]] = sub["status"]
                    pending.discard(sub["id"])


async def run(url: str, tokens: list[str], total: int, timeout_s: float) -> tuple[Tally, float]:
    code = KERNEL.read_bytes()
    tally, start = Tally(), asyncio.Event()
    shares = [total // len(tokens) + (1 if i < total % len(tokens) else 0) for i in range(len(tokens))]
    deadline = time.monotonic() + timeout_s
    tasks = [asyncio.create_task(client(url, tok, n, code, tally, start, deadline)) for tok, n in zip(tokens, shares)]
    t0 = time.perf_counter()
    start.set()
    await asyncio.gather(*tasks)
    return tally, time.perf_counter() - t0


def server_side(metrics: str, method: str, route: str) -> str:
    """The API's own latency for one route, from its ``/metrics`` histogram: the bucket bounds that
    hold the median and the 99th percentile (time inside the server, without the client's queueing)."""
    from prometheus_client.parser import text_string_to_metric_families

    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if (sample.name == "kernelrank_http_request_duration_seconds_bucket"
                    and sample.labels.get("method") == method and sample.labels.get("route") == route):
                le = float(sample.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + sample.value
    if not buckets:
        return f"{method} {route}: no samples"
    bounds = sorted(buckets)
    total = buckets[bounds[-1]]

    def bound(q: float) -> str:
        b = next(b for b in bounds if buckets[b] >= q * total)
        return "> 10 s" if b == float("inf") else f"<= {b * 1000:g} ms"

    return f"{method} {route} inside the API: {total:.0f} requests, p50 {bound(0.5)}, p99 {bound(0.99)}"


def database_check(data_dir: Path) -> tuple[int, int, int]:
    """``(submissions, runs, submissions with more than one public run)`` in the service's SQLite."""
    from sqlalchemy import create_engine, text

    engine = create_engine(f"sqlite:///{data_dir / 'kernelrank.db'}")
    with engine.connect() as c:
        subs = c.execute(text("SELECT count(*) FROM submissions")).scalar_one()
        runs = c.execute(text("SELECT count(*) FROM runs")).scalar_one()
        dup = c.execute(text("SELECT count(*) FROM (SELECT submission_id FROM runs WHERE kind = 'public' "
                             "GROUP BY submission_id HAVING count(*) > 1)")).scalar_one()
    engine.dispose()
    return subs, runs, dup


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--submissions", type=int, default=200)
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for every verdict")
    ap.add_argument("--keep-limits", action="store_true", help="keep the default per-user limits")
    args = ap.parse_args()

    print(f"machine: {machine()}")
    limits = {} if args.keep_limits else {"rate_submissions_per_hour": "0", "rate_concurrent_jobs": "0"}
    with tempfile.TemporaryDirectory(prefix="kernelrank-load-") as tmp:
        with embedded_service(Path(tmp), **limits) as svc:
            tokens = []
            with httpx.Client(base_url=svc.url, headers={"Authorization": f"Bearer {svc.admin_token}"}) as admin:
                for i in range(args.clients):
                    r = admin.post(f"{API}/users", json={"name": f"load{i:02d}"})
                    r.raise_for_status()
                    tokens.append(r.json()["token"])
            print(f"service up ({svc.url}); {args.clients} clients sending {args.submissions} test-mode "
                  f"submissions of softmax {KERNEL.name}")
            tally, wall = asyncio.run(run(svc.url, tokens, args.submissions, args.timeout))
            stored, runs, dup_runs = database_check(svc.data_dir)
            with httpx.Client(base_url=svc.url) as c:
                metrics = c.get("/metrics").text

    accepted = len(tally.accepted)
    unique = len(set(tally.accepted))
    lost = accepted - len(tally.final)
    verdicts = collections.Counter(tally.final.values())
    print(f"accepted {accepted}/{args.submissions} (refused: {dict(tally.refused) or 'none'}), "
          f"finished {len(tally.final)}, lost {lost}, duplicated ids {accepted - unique}")
    print(f"database: {stored} submissions, {runs} runs, {dup_runs} submissions with a second public run")
    print(f"verdicts: {dict(verdicts)}")
    if tally.errors:
        print(f"client errors: {collections.Counter(tally.errors)}")
    print(describe("POST /api/v1/submissions", tally.post_s))
    print(describe("GET /api/v1/submissions (polls)", tally.get_s))
    print(describe("all API requests", tally.post_s + tally.get_s))
    print(f"total: {wall:.1f} s from the first submission to the last verdict "
          f"({accepted / wall:.2f} submissions/s end to end)")
    print(server_side(metrics, "POST", "/api/v1/submissions"))
    print(server_side(metrics, "GET", "/api/v1/submissions"))
    print(f"machine after: {machine()}")
    durations = [line for line in metrics.splitlines()
                 if line.startswith("kernelrank_job_duration_seconds_") and "_bucket" not in line]
    print("server-side job durations (from /metrics): " + "; ".join(durations))


if __name__ == "__main__":
    main()
