"""Render times of the web pages over a database with many submissions.

    python bench/web_pages.py [--users 1000] [--per-user 10] [--repeats 5]

Builds a fresh SQLite database in a temporary folder (the real problems, ``users × per_user``
ranked softmax submissions on ``cpu`` with their public runs), then times each page through the
ASGI app in-process (FastAPI's TestClient: no network), printing the median and max of
``--repeats`` requests per page in milliseconds. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def seed(users: int, per_user: int) -> tuple[str, int]:
    """Fill the database; returns a token of the user with the most submissions and one submission id."""
    from sqlalchemy import insert, select

    from kernelrank.db.models import Run, Submission, User
    from kernelrank.db.session import migrate, session_scope
    from kernelrank.problems import load_all
    from kernelrank.services import problems, runners
    from kernelrank.services import users as users_service

    migrate()
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    case = lambda i, ns: {"kind": "benchmark", "index": i, "spec": {"M": 4096, "N": 1024}, "passed": True,  # noqa: E731
                          "message": "ok", "timing": {"runs": 20, "mean_ns": ns, "std_ns": ns / 10, "stderr_ns": 1.0,
                                                      "min_ns": ns * .9, "median_ns": ns, "max_ns": ns * 1.3},
                          "tflops": 0.01, "gbps": 30.0, "ref_mean_ns": ns * 1.2, "speedup": 1.2}
    with session_scope() as s:
        problems.sync_all(s, load_all())
        rev_id = problems.current_revision(s, "softmax").id
        runners.heartbeat(s, "bench:cpu", "cpu", {}, "bench")
        s.execute(insert(User), [{"name": f"user{i:05d}"} for i in range(users)])
        ids = [uid for (uid,) in s.execute(select(User.id).order_by(User.id))]
        rows = [{"user_id": uid, "problem_revision_id": rev_id, "device": "cpu", "mode": "leaderboard",
                 "language": "pytorch", "code": "def custom_kernel(d):\n    return d[0]\n", "code_sha256": "0" * 64,
                 "status": "passed", "score_ns": 1e6 + 97 * i + j, "speedup": 1.2, "ranked": True,
                 "created_at": t0 + dt.timedelta(seconds=i * per_user + j), "progress": {}}
                for i, uid in enumerate(ids) for j in range(per_user)]
        for k in range(0, len(rows), 5000):
            s.execute(insert(Submission), rows[k:k + 5000])
        subs = list(s.execute(select(Submission.id, Submission.score_ns)))
        runs = [{"submission_id": sid, "kind": "public", "status": "passed", "score_ns": score,
                 "result": {"status": "passed", "cases": [case(c, score * (1 + c / 4)) for c in range(4)]}, "logs": ""}
                for sid, score in subs]
        for k in range(0, len(runs), 5000):
            s.execute(insert(Run), runs[k:k + 5000])
        token = users_service.issue_token(s, users_service.get_user(s, "user00000"), "bench")
        return token, subs[0][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--per-user", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="kernelrank-bench-web-")
    os.environ["KERNELRANK_DATA_DIR"] = folder
    os.environ["KERNELRANK_DATABASE_URL"] = f"sqlite:///{folder}/kernelrank.db"
    start = time.perf_counter()
    token, sid = seed(args.users, args.per_user)
    print(f"seeded {args.users * args.per_user} ranked submissions of {args.users} users "
          f"in {time.perf_counter() - start:.1f} s; load average {os.getloadavg()[0]:.2f}")

    from fastapi.testclient import TestClient

    from kernelrank.api.app import create_app

    client = TestClient(create_app())
    assert client.post("/signin", data={"token": token}, follow_redirects=False).status_code == 303
    pages = ["/", "/problems/softmax", "/problems/softmax/charts/cpu/best.svg",
             "/problems/softmax/charts/cpu/cases.svg", "/runners", "/me/submissions", f"/submissions/{sid}",
             f"/submissions/{sid}/live"]
    print(f"{'page':45} {'median ms':>10} {'max ms':>8} {'KiB':>6}")
    for page in pages:
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            r = client.get(page)
            times.append((time.perf_counter() - t) * 1e3)
            assert r.status_code == 200, (page, r.status_code)
        print(f"{page:45} {statistics.median(times):10.1f} {max(times):8.1f} {len(r.content) / 1024:6.1f}")


if __name__ == "__main__":
    main()
