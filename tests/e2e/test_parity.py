"""Every path judges alike: each example and template of every problem in every language judged in
test mode through the service (HTTP -> queue -> the runner's warm path: children forked from its
zygote) and through ``kernelrank eval`` (a cold child), with the same verdict and the same cases
passing and failing on both. (The attack corpus is judged once per tier, in leaderboard mode, by
``tests/runner/test_attacks.py``.)

The service is the embedded one (SQLite, filesystem broker, ``kernelrank serve``'s own CPU runner):
the judgement does not depend on the backend, and ``tests/e2e/test_service.py`` covers Redis and
PostgreSQL. Submissions go in as the admin (exempt from the per-user limits) all at once; while the
runner works through them, this test runs ``kernelrank eval --json`` on each file, one at a time.
The wall time is printed (``-s``) and recorded in docs/research/bench-history.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import API, Service
from tests.e2e.test_service import wait_for_verdicts

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = ("softmax", "gemm", "mla_decode")
#: Every file a user is told to start from or to compare with, per problem.
KERNELS = sorted(p for problem in PROBLEMS for sub in ("examples", "templates")
                 for p in (ROOT / "reference_kernels" / problem / sub).glob("*.py"))
#: Seconds for every service verdict of the batch (C++ builds take 30-60 s each here).
VERDICT_TIMEOUT = 1800.0
#: Seconds for one ``kernelrank eval`` (a cold child, a C++ build, a hang reaching its deadline).
EVAL_TIMEOUT = 600.0


def _label(path: Path) -> str:
    return str(path.relative_to(ROOT / "reference_kernels"))


def _judgement(result: dict[str, Any]) -> tuple[str, list[tuple[str, int, bool]]]:
    """What must agree: the verdict and which cases passed or failed (the messages carry figures
    and paths that differ between the paths)."""
    cases = [(c["kind"], int(c["index"]), bool(c["passed"])) for c in result.get("cases") or []]
    return result["status"], cases


def _eval(path: Path, env: dict[str, str]) -> dict[str, Any]:
    problem = path.relative_to(ROOT / "reference_kernels").parts[0]
    proc = subprocess.run([sys.executable, "-m", "kernelrank.cli.main", "eval", problem, str(path), "--mode", "test",
                           "--device", "cpu", "--json"], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=EVAL_TIMEOUT, stdin=subprocess.DEVNULL)
    lines = proc.stdout.strip().splitlines()
    assert lines, f"eval printed no JSON for {_label(path)} (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(lines[-1])


@pytest.mark.parametrize("service", ["embedded"], indirect=True)
def test_service_and_eval_judge_every_kernel_alike(service: Service, tmp_path: Path) -> None:
    started = time.monotonic()
    files = KERNELS
    assert len(KERNELS) >= 30, len(KERNELS)
    ids: dict[Path, int] = {}
    with service.client(service.admin_token) as client:
        for path in files:
            problem = path.relative_to(ROOT / "reference_kernels").parts[0]
            r = client.post(f"{API}/submissions", data={"problem": problem, "device": "cpu", "mode": "test"},
                            files={"file": (path.name, path.read_bytes(), "text/x-python")})
            assert r.status_code == 202, (_label(path), r.text)
            ids[path] = int(r.json()["id"])
    # eval as a user would run it: the service's problems, its own cache and scratch folders
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELRANK_")}
    env.update({"KERNELRANK_SCRATCH_DIR": str(tmp_path / "scratch"),
                "PYTHONUNBUFFERED": "1"})
    local = {path: _eval(path, env) for path in files}
    remote = wait_for_verdicts(service, service.admin_token, list(ids.values()), timeout=VERDICT_TIMEOUT)
    differ, cold_service = [], []
    for path in files:
        served = remote[ids[path]]
        runs = [run for run in served.get("runs", []) if run.get("result")]
        assert runs, f"{_label(path)}: the service recorded no result: {served.get('message')}"
        result = runs[-1]["result"]
        isolation = result.get("isolation") or {}
        if isolation.get("start") not in ("warm", None):  # None: refused before a child started
            cold_service.append(_label(path))
        if _judgement(result) != _judgement(local[path]):
            differ.append(f"{_label(path)}: service {served['status']} ({str(served.get('message'))[:300]}) | "
                          f"eval {local[path]['status']} ({str(local[path].get('message'))[:300]})")
    print(f"\nparity: {len(files)} examples and templates judged on both paths in {time.monotonic() - started:.0f} s")
    assert not cold_service, f"the service judged these on the cold path, not from its zygote: {cold_service}"
    assert not differ, "verdicts differ between the service and kernelrank eval:\n" + "\n".join(differ)
