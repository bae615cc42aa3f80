"""kernelguard as an advisory signal (stored at the verdict, admins only, never the judge) and
``kernelrank export`` (ranked submissions as JSON Lines or Parquet, code only where the problem's
code is open)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import World, passed_result, record, submit

#: the harness catches this at run time; kernelguard flags it statically (TIMER_MONKEYPATCH)
CLOCK_PATCH = ("import time\nimport torch\n\n_real = time.perf_counter_ns\ntime.perf_counter_ns = lambda: 0\n\n"
               "def custom_kernel(data):\n    return torch.softmax(data[0], dim=-1)\n")
KERNELRANK = str(Path(sys.executable).parent / "kernelrank")


def ranked(client: TestClient, world: World, user: str, score: float, code: str | None = None) -> int:
    kwargs = {"code": code} if code else {}
    sid = submit(client, world.tokens[user], "softmax", mode="leaderboard", **kwargs).json()["id"]
    record(sid, "public", passed_result(score))
    record(sid, "secret", passed_result(score + 1))
    return sid


def test_guard_is_stored_at_the_verdict_shown_to_admins_only_and_never_judges(client: TestClient, world: World) -> None:
    sid = submit(client, world.tokens["alice"], "softmax", code=CLOCK_PATCH, mode="leaderboard").json()["id"]
    assert client.get(f"/api/v1/submissions/{sid}", headers=world.auth("root")).json()["guard"] is None  # not yet
    record(sid, "public", passed_result(100.0))
    record(sid, "secret", passed_result(101.0))
    admin = client.get(f"/api/v1/submissions/{sid}", headers=world.auth("root")).json()
    guard = admin["guard"]
    assert guard["tool"] == "kernelguard" and guard["classification"] == "hacked" and guard["flagged"] is True
    assert "TIMER_MONKEYPATCH" in {p["pattern"] for p in guard["patterns"]}
    # advisory: the verdict and ranking are the harness's
    assert admin["status"] == "passed" and admin["ranked"] is True
    assert client.get(f"/api/v1/submissions/{sid}", headers=world.auth("alice")).json()["guard"] is None
    assert client.get(f"/api/v1/submissions/{sid}").json()["guard"] is None
    clean = ranked(client, world, "bob", 200.0)
    assert client.get(f"/api/v1/submissions/{clean}", headers=world.auth("root")).json()["guard"]["classification"] == "valid"


def test_a_failing_guard_is_recorded_as_an_error_and_the_verdict_stands(client: TestClient, world: World,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import kernelguard

    def broken(*_a, **_k):
        raise RuntimeError("detector crashed")

    monkeypatch.setattr(kernelguard, "analyze_code", broken)
    sid = ranked(client, world, "alice", 100.0)
    body = client.get(f"/api/v1/submissions/{sid}", headers=world.auth("root")).json()
    assert body["guard"] == {"tool": "kernelguard", "error": "RuntimeError: detector crashed"}
    assert body["status"] == "passed" and body["ranked"] is True


def test_export_has_ranked_rows_with_code_only_where_open(client: TestClient, world: World, tmp_path: Path) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services import NotFound, export

    fast = ranked(client, world, "alice", 100.0)
    slow = ranked(client, world, "bob", 300.0)
    test_only = submit(client, world.tokens["bob"], "softmax", mode="test").json()["id"]
    record(test_only, "public", passed_result(50.0))
    with session_scope() as s:
        rows = export.ranked_rows(s, "softmax")
    assert [(r["submission_id"], r["place"], r["user"]) for r in rows] == [(fast, 1, "alice"), (slow, 2, "bob")]
    assert all(r["code"] is None and r["code_sha256"] for r in rows)
    assert rows[0]["revision"] == world.revisions["softmax"] and rows[0]["device"] == "cpu"
    assert rows[0]["results"]["score_ns"] == 100.0 and "logs" not in rows[0]["results"]
    assert rows[0]["guard"]["classification"] == "valid"
    # each row carries its score's reproducibility bundle, as an anonymous reader gets it
    bundle = rows[0]["bundle"]
    assert bundle["submission"]["id"] == rows[0]["submission_id"] and bundle["submission"]["code"] is None
    assert bundle["seeds"]["secret_seed"] is None and [r["kind"] for r in bundle["runs"]] == ["public", "secret"]
    with session_scope() as s:
        export.set_code_open(s, "softmax")
    with session_scope() as s:
        rows = export.ranked_rows(s, "softmax")
        assert export.ranked_rows(s, "softmax", device_queue="cuda-h100") == []
        with pytest.raises(NotFound):
            export.ranked_rows(s, "no_such_problem")
    assert rows[0]["code"].startswith("import torch")

    export.write_jsonl(rows, tmp_path / "x.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert [line["submission_id"] for line in lines] == [fast, slow] and list(lines[0]) == list(export.COLUMNS)

    import pyarrow.parquet as pq

    export.write_parquet(rows, tmp_path / "x.parquet")
    table = pq.read_table(tmp_path / "x.parquet").to_pylist()
    assert [t["submission_id"] for t in table] == [fast, slow]
    assert table[0]["code"] == rows[0]["code"] and json.loads(table[0]["results"])["score_ns"] == 100.0
    assert json.loads(table[0]["bundle"])["submission"]["id"] == rows[0]["submission_id"]


def test_export_and_code_open_from_the_command_line(client: TestClient, world: World, database: str,
                                                    tmp_path: Path) -> None:
    sid = ranked(client, world, "alice", 100.0)
    env = dict(os.environ, KERNELRANK_DATABASE_URL=database, KERNELRANK_DATA_DIR=str(tmp_path / "data"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([KERNELRANK, *args], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)

    p = run("export", "softmax")
    assert p.returncode == 0, p.stderr
    row = json.loads((tmp_path / "softmax-ranked.jsonl").read_text())
    assert row["submission_id"] == sid and row["code"] is None and "without code" in p.stderr
    assert run("problems", "code-open", "softmax").returncode == 0
    p = run("export", "softmax", "--format", "parquet", "-o", str(tmp_path / "o.parquet"))
    assert p.returncode == 0, p.stderr

    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "o.parquet").to_pylist()[0]["code"].startswith("import torch")
    missing = run("export", "no_such_problem")
    assert missing.returncode == 2 and "no_such_problem" in missing.stderr
