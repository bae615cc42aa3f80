"""Leaderboard latency over a large Postgres database: fills it with ``--rows`` submissions (bulk
insert), then times ``GET /api/v1/leaderboards/<problem>/<device>`` (and the HTML page
``/problems/<problem>`` when this build has one, and ``/metrics``, whose collector scans the
submissions table) through a real API process. Prints p50/p95/p99 (never asserts; the target is
p99 under 100 ms with 100,000 submissions).

The data: ``--users`` users; a share ``--hot`` of the submissions go to softmax on ``cpu`` (the
board timed first, the largest), the rest spread over every problem and three device queues;
modes and verdicts mixed (about half the leaderboard submissions ranked), created over 90 days.

Postgres: ``--database-url`` (``postgresql+psycopg://...``; it must be empty, it gets migrated),
else a private cluster is started on a free loopback port in a temp folder
(``apt-get install -y postgresql`` first).

Usage: ``python bench/leaderboard.py [--rows 100000] [--users 2000] [--requests 200] [--database-url URL]``
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import random
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.service import API, api_process, describe, machine, private_postgres  # noqa: E402
from kernelrank.vocab import Mode, Verdict  # noqa: E402

DEVICES = ("cpu", "cuda-h100", "cuda-a100")
MODE_SHARES = ((Mode.leaderboard, 0.55), (Mode.test, 0.3), (Mode.benchmark, 0.15))
LOSING = ((Verdict.failed, 0.5), (Verdict.error, 0.15), (Verdict.timeout, 0.1), (Verdict.compile_error, 0.2),
          (Verdict.rejected, 0.05))
CODE = ("import torch\n\n\ndef custom_kernel(data):\n    x, = data\n"
        "    return torch.softmax(x, dim=-1)  # variant {i}\n")


def _pick(rng: random.Random, weighted) -> str:
    return rng.choices([w[0] for w in weighted], [w[1] for w in weighted])[0]


def fill(url: str, rows: int, n_users: int, hot: float, seed: int = 0) -> dict[str, float]:
    """Migrate the database at ``url``, load the problems and insert ``n_users`` users and ``rows``
    submissions; returns timings (s) of the steps."""
    from sqlalchemy import insert, select, text

    from kernelrank.db.models import ProblemRevision, Submission, User
    from kernelrank.db.session import make_engine, migrate
    from kernelrank.problems import load_all
    from kernelrank.services import problems as problem_service
    from sqlalchemy.orm import Session

    times = {}
    t0 = time.perf_counter()
    migrate(url)
    engine = make_engine(url)
    with Session(engine) as s, s.begin():
        problem_service.sync_all(s, load_all())
    with Session(engine) as s, s.begin():
        s.execute(insert(User), [{"name": f"user{i:05d}", "is_admin": False} for i in range(n_users)])
    with Session(engine) as s:
        users = list(s.scalars(select(User.id)))
        revs = {r.problem.name: r.id for r in s.scalars(select(ProblemRevision).where(ProblemRevision.is_current))}
    times["migrate, problems, users"] = time.perf_counter() - t0

    rng = random.Random(seed)
    now = dt.datetime.now(dt.timezone.utc)
    problems = sorted(revs)
    t0 = time.perf_counter()
    batch: list[dict] = []
    for i in range(rows):
        if rng.random() < hot:
            problem, device = "softmax", "cpu"
        else:
            problem, device = rng.choice(problems), rng.choice(DEVICES)
        mode = _pick(rng, MODE_SHARES)
        status = Verdict.passed if rng.random() < 0.55 else _pick(rng, LOSING)
        ranked = mode == Mode.leaderboard and status == Verdict.passed
        created = now - dt.timedelta(seconds=rng.uniform(0, 90 * 86400))
        started = created + dt.timedelta(seconds=rng.uniform(0.5, 60))
        code = CODE.format(i=i)
        batch.append({
            "user_id": rng.choice(users), "problem_revision_id": revs[problem], "device": device, "mode": mode,
            "language": "pytorch", "filename": "kernel.py", "code": code,
            "code_sha256": hashlib.sha256(code.encode()).hexdigest(), "status": status, "message": "",
            "score_ns": rng.lognormvariate(13, 0.4) if ranked else None,
            "speedup": rng.uniform(0.5, 3.0) if status == Verdict.passed else None,
            "tflops": rng.uniform(0.01, 2.0) if status == Verdict.passed else None,
            "gbps": rng.uniform(5.0, 400.0) if status == Verdict.passed else None,
            "ranked": ranked, "runner": "bench", "progress": {}, "created_at": created, "started_at": started,
            "finished_at": started + dt.timedelta(seconds=rng.uniform(1, 600)),
        })
        if len(batch) == 5000 or i == rows - 1:
            with Session(engine) as s, s.begin():
                s.execute(insert(Submission), batch)
            batch = []
    times["insert submissions"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        # what autovacuum does after a bulk insert: statistics and the visibility map (index-only scans)
        c.execute(text("VACUUM ANALYZE"))
    times["VACUUM ANALYZE"] = time.perf_counter() - t0
    engine.dispose()
    return times


def board_stats(url: str, problem: str, device: str) -> tuple[int, int, int, float, str]:
    """``(submissions, ranked, users ranked, server-side ms, scans)`` of one board: its sizes, the
    leaderboard query's own execution time (``EXPLAIN ANALYZE``) and the scans of its plan."""
    from sqlalchemy import func, select, text
    from sqlalchemy.orm import Session

    from kernelrank.db.models import Problem, ProblemRevision, Submission
    from kernelrank.db.session import make_engine

    engine = make_engine(url)
    with Session(engine) as s:
        rev = s.scalar(select(ProblemRevision.id).join(Problem)
                       .where(Problem.name == problem, ProblemRevision.is_current))
        where = (Submission.problem_revision_id == rev, Submission.device == device)
        n = s.scalar(select(func.count()).where(*where))
        ranked = s.scalar(select(func.count()).where(*where, Submission.ranked.is_(True)))
        users = s.scalar(select(func.count(func.distinct(Submission.user_id))).where(*where, Submission.ranked.is_(True)))
        from kernelrank.services.leaderboard import ranking_query

        q = ranking_query([rev], device, 100)
        compiled = q.compile(engine, compile_kwargs={"literal_binds": True})
        plan = s.execute(text(f"EXPLAIN (ANALYZE, FORMAT TEXT) {compiled}")).scalars().all()
    engine.dispose()
    ms = next((float(line.split(":")[1].split()[0]) for line in plan if line.startswith("Execution Time")), float("nan"))
    scans = "; ".join(line.strip().split("  (")[0].lstrip("-> ") for line in plan if " Scan " in line)
    return n, ranked, users, ms, scans


def time_get(url: str, path: str, requests: int, warmup: int = 20) -> tuple[list[float], int]:
    """Sequential GETs of ``path``: ``(latencies in s, status of the last)``."""
    out = []
    status = 0
    with httpx.Client(base_url=url, timeout=30) as c:
        for _ in range(warmup):
            c.get(path)
        for _ in range(requests):
            t0 = time.perf_counter()
            r = c.get(path)
            out.append(time.perf_counter() - t0)
            status = r.status_code
    return out, status


def measure(db_url: str, data_dir: Path, requests: int) -> None:
    for problem, device in (("softmax", "cpu"), ("gemm", "cuda-h100")):
        n, ranked, users, ms, scans = board_stats(db_url, problem, device)
        print(f"board {problem}/{device}: {n} submissions, {ranked} ranked, {users} users ranked; "
              f"leaderboard query {ms:.1f} ms in Postgres (EXPLAIN ANALYZE; {scans})")
    with api_process(db_url, data_dir) as url:
        for path in (f"{API}/leaderboards/softmax/cpu", f"{API}/leaderboards/gemm/cuda-h100"):
            lat, status = time_get(url, path, requests)
            print(describe(f"GET {path} (HTTP {status})", lat))
        with httpx.Client(base_url=url) as c:
            page = c.get("/problems/softmax").status_code
        if page == 200:
            lat, status = time_get(url, "/problems/softmax", requests)
            print(describe("GET /problems/softmax (HTML page)", lat))
        else:
            print(f"GET /problems/softmax: HTTP {page}: no leaderboard page in this build, not timed")
        lat, status = time_get(url, "/metrics", max(20, requests // 10), warmup=2)
        print(describe(f"GET /metrics (HTTP {status})", lat))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--users", type=int, default=2000)
    ap.add_argument("--hot", type=float, default=0.5, help="share of the submissions on softmax/cpu")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--database-url", default=None, help="an empty Postgres database (default: a private cluster)")
    args = ap.parse_args()

    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="kernelrank-board-") as tmp:
        root = Path(tmp)
        data_dir = root / "data"
        data_dir.mkdir()
        pg = contextlib.nullcontext(args.database_url) if args.database_url else private_postgres()
        with pg as db_url:
            times = fill(db_url, args.rows, args.users, args.hot)
            print("fill: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items()))
            measure(db_url, data_dir, args.requests)
    print(f"machine after: {machine()}")


if __name__ == "__main__":
    main()
