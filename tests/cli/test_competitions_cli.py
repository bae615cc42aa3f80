"""``kernelrank competitions create|list|show|accept-late|finalize`` against a real API (uvicorn in
a thread, ``tests/cli/test_cancel.py``'s server) whose jobs are recorded, not run: the re-judging
results come back through the control worker's tasks."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from tests.api.conftest import (Recorder, World, database, dispatched, migrated_template, passed_result,  # noqa: F401
                                real_problems, record, world)
from tests.cli.test_cancel import server  # noqa: F401 - the fixture


def cli(url: str, token: str, *args: str):
    from kernelrank.cli.main import app

    return CliRunner().invoke(app, ["competitions", *args, "--server", url, "--token", token])


def ranked(url: str, world: World, user: str, score: float) -> int:
    import httpx

    with httpx.Client(base_url=url, headers=world.auth(user)) as c:
        r = c.post("/api/v1/submissions", data={"problem": "softmax", "mode": "leaderboard"},
                   files={"file": ("k.py", b"import torch\ndef custom_kernel(d):\n    return torch.softmax(d[0], -1)\n")})
    assert r.status_code == 202, r.text
    sid = r.json()["id"]
    record(sid, "public", passed_result(score, speedup=2.0))
    record(sid, "secret", passed_result(score, speedup=2.0))
    return sid


def test_an_admin_runs_a_competition_from_the_command_line(server: str, world: World,  # noqa: F811
                                                           dispatched: Recorder) -> None:  # noqa: F811
    from kernelrank import control

    root, alice = world.tokens["root"], world.tokens["alice"]
    res = cli(server, alice, "create", "cup", "--title", "The cup", "--board", "softmax/cpu", "--end", "1d")
    assert res.exit_code == 2 and "HTTP 403" in res.output
    res = cli(server, root, "create", "cup", "--title", "The cup", "--board", "softmax", "--end", "1d")
    assert res.exit_code == 2 and "PROBLEM/DEVICE" in res.output
    res = cli(server, root, "create", "cup", "--title", "The cup", "--board", "softmax/cpu", "--start", "1h",
              "--end", "soon")
    assert res.exit_code == 2 and "--end" in res.output
    res = cli(server, root, "create", "cup", "--title", "The cup", "--board", "softmax/cpu", "--end", "1d",
              "--final-top", "1")
    assert res.exit_code == 0, res.output
    assert "created competition cup: softmax/cpu" in res.output

    a, b = ranked(server, world, "alice", 10.0), ranked(server, world, "bob", 20.0)
    res = cli(server, alice, "list")
    assert res.exit_code == 0 and "cup" in res.output and "open" in res.output
    res = cli(server, alice, "show", "cup")
    assert res.exit_code == 0, res.output
    assert f"#1 alice 10 ns (submission {a})" in res.output and f"#2 bob 20 ns (submission {b})" in res.output

    before = len(dispatched.calls)
    res = cli(server, root, "finalize", "cup")
    assert res.exit_code == 0, res.output
    assert "cup: finalizing; 1 entries re-judged" in res.output
    [(job, _queue, _limit)] = dispatched.calls[before:]
    assert job["submission_id"] == a
    assert control.job_started.run(a, "runner-cpu-2", job["attempt"])["run"] is True
    for kind in ("public", "secret"):
        control.record_result.run(a, kind, passed_result(30.0, speedup=2.0), "runner-cpu-2", job["attempt"])
    res = cli(server, alice, "show", "cup", "--json")
    assert res.exit_code == 0, res.output
    body = json.loads(res.stdout)
    assert body["final"] is True
    assert [(e["user"], e["final_place"]) for e in body["competition_boards"][0]["entries"]] == [("alice", 1),
                                                                                                ("bob", 2)]
    res = cli(server, alice, "show", "cup")
    # alice, re-judged (the top 1), stays ahead of the entries not re-judged
    assert "final #1 30 ns" in res.output and "final (Kendall tau-b 1.000)\n    1. alice 1\n    2. bob 2" in res.output
    res = cli(server, root, "finalize", "cup")
    assert res.exit_code == 2 and "final already" in res.output
