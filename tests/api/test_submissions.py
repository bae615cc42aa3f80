"""POST/GET /api/v1/submissions: creation (form and JSON), the queued job, visibility, listing,
and every refusal (nothing stored, nothing queued)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from fastapi.testclient import TestClient

from kernelrank.db.models import Runner
from kernelrank.problems import Problem
from kernelrank.queue import job_time_limit
from tests.api.conftest import KERNEL, MAX_CODE_BYTES, Recorder, World, passed_result, record, submit


# -- creating -------------------------------------------------------------------------------------
def test_multipart_submission_is_queued_with_the_secret_seed(client: TestClient, world: World,
                                                             dispatched: Recorder,
                                                             real_problems: list[Problem]) -> None:
    r = submit(client, world.tokens["alice"], "softmax")
    assert r.status_code == 202, r.text
    sid = r.json()["id"]
    assert r.json() == {"id": sid, "status": "queued", "message": ""}
    assert r.headers["location"] == f"/api/v1/submissions/{sid}"
    [(job, queue, time_limit)] = dispatched.calls
    softmax = next(p for p in real_problems if p.name == "softmax")
    assert queue == "cpu"
    assert job["submission_id"] == sid
    assert job["source"] == KERNEL
    assert job["mode"] == "leaderboard" and job["device"] == "cpu"  # the defaults
    assert job["runs"] == ["public", "secret"]
    assert job["secret_seed"] == world.seeds["softmax"]
    assert job["problem"]["revision"] == world.revisions["softmax"]
    assert job["problem"]["reference_source"] == softmax.reference_source
    assert time_limit == job_time_limit(softmax.definition.budgets.model_dump(), "leaderboard")
    # the seed went to the runner's job, never back to the user
    assert str(world.seeds["softmax"]) not in r.text
    owner = client.get(f"/api/v1/submissions/{sid}", headers=world.auth("alice"))
    assert str(world.seeds["softmax"]) not in owner.text


def test_json_submission_in_test_mode_has_no_secret_run(client: TestClient, world: World,
                                                         dispatched: Recorder) -> None:
    code = "import triton\nimport torch\n\ndef custom_kernel(data):\n    return data[0] * 2  # é\n"
    r = client.post("/api/v1/submissions", headers=world.auth("bob"),
                    json={"problem": "gemm", "device": "cpu", "mode": "test", "code": code, "filename": "g.py"})
    assert r.status_code == 202, r.text
    [(job, queue, _)] = dispatched.calls
    assert (job["submission_id"], queue) == (r.json()["id"], "cpu")
    assert job["source"] == code
    assert job["mode"] == "test"
    assert job["runs"] == ["public"]
    assert job["secret_seed"] is None
    body = client.get(f"/api/v1/submissions/{r.json()['id']}", headers=world.auth("bob")).json()
    assert body["language"] == "triton"
    assert body["problem"] == "gemm" and body["mode"] == "test" and body["code"] == code


def test_code_exactly_at_the_limit_is_accepted(client: TestClient, world: World) -> None:
    code = KERNEL + "#" * (MAX_CODE_BYTES - len(KERNEL))
    assert len(code.encode()) == MAX_CODE_BYTES
    assert submit(client, world.tokens["alice"], code=code).status_code == 202


# -- reading one ----------------------------------------------------------------------------------
def test_owner_and_admin_see_code_others_see_status_only(client: TestClient, world: World) -> None:
    sid = submit(client, world.tokens["alice"]).json()["id"]
    record(sid, "public", passed_result(1000.0, logs={"stdout": "alice-debug-print", "stderr": ""}))
    record(sid, "secret", {"status": "error", "message": "runtime error in custom_kernel: boom\n"
                                                         "Traceback:\n  x = secret_line_of_alice()",
                           "cases": [{"kind": "benchmark", "index": 0, "passed": False,
                                      "message": "raised\n  secret_line_of_alice()"}],
                           "logs": {"stdout": "", "stderr": "alice-stderr"}})

    owner = client.get(f"/api/v1/submissions/{sid}", headers=world.auth("alice")).json()
    assert owner["code"] == KERNEL
    assert "alice-debug-print" in owner["logs"] and "alice-stderr" in owner["logs"]
    assert "secret_line_of_alice" in owner["message"]
    assert owner["status"] == "error" and owner["ranked"] is False
    assert [(run["kind"], run["status"]) for run in owner["runs"]] == [("public", "passed"), ("secret", "error")]
    assert all("logs" not in run["result"] for run in owner["runs"])
    assert owner["user"] == "alice" and owner["problem"] == "softmax"
    assert owner["revision"] == world.revisions["softmax"]
    assert owner["created_at"].endswith(("Z", "+00:00")) and owner["finished_at"] is not None

    admin = client.get(f"/api/v1/submissions/{sid}", headers=world.auth("root")).json()
    assert admin["code"] == KERNEL and admin["logs"] == owner["logs"]

    for headers in (world.auth("bob"), {}):
        r = client.get(f"/api/v1/submissions/{sid}", headers=headers)
        assert r.status_code == 200
        other = r.json()
        assert other["code"] is None and other["logs"] is None
        assert other["status"] == "error"
        assert other["message"] == "secret-seed run: runtime error in custom_kernel: boom"
        assert "custom_kernel(data)" not in r.text  # no line of the code
        assert "secret_line_of_alice" not in r.text and "alice-debug-print" not in r.text
        assert "alice-stderr" not in r.text


def test_unknown_submission_is_404(client: TestClient, world: World) -> None:
    r = client.get("/api/v1/submissions/999", headers=world.auth("alice"))
    assert r.status_code == 404 and "999" in r.json()["detail"]


# -- listing ----------------------------------------------------------------------------------------
def test_list_shows_own_submissions_newest_first_with_filters(client: TestClient, world: World) -> None:
    a1 = submit(client, world.tokens["alice"], "softmax").json()["id"]
    a2 = submit(client, world.tokens["alice"], "gemm", mode="test").json()["id"]
    submit(client, world.tokens["bob"], "softmax")
    record(a2, "public", passed_result(500.0))

    def ids(**params: str) -> list[int]:
        r = client.get("/api/v1/submissions", params=params, headers=world.auth("alice"))
        assert r.status_code == 200, r.text
        assert all(s["code"] is None and s["logs"] is None and s["user"] == "alice" for s in r.json())
        return [s["id"] for s in r.json()]

    assert ids() == [a2, a1]
    assert ids(problem="gemm") == [a2]
    assert ids(problem="softmax") == [a1]
    assert ids(device="cpu") == [a2, a1]
    assert ids(device="cuda-h100") == []
    assert ids(status="queued") == [a1]
    assert ids(status="passed") == [a2]
    assert ids(limit="1") == [a2]
    bad = client.get("/api/v1/submissions", params={"status": "bogus"}, headers=world.auth("alice"))
    assert bad.status_code == 422
    assert client.get("/api/v1/submissions", params={"limit": "0"}, headers=world.auth("alice")).status_code == 422


# -- refusals ---------------------------------------------------------------------------------------
def _make_cpu_stale(world: World, seconds: float | None = None) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.settings import get_settings

    ago = seconds if seconds is not None else get_settings().runner_online_seconds + 5
    old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=ago)
    with session_scope() as s:
        for runner in s.query(Runner).all():
            runner.last_heartbeat = old


@pytest.mark.parametrize(("fields", "code", "status", "words"), [
    ({"problem": "nope"}, KERNEL, 404, "unknown problem"),
    ({"problem": "softmax", "device": "gpu"}, KERNEL, 422, "not a device queue"),
    ({"problem": "softmax", "device": "cuda-h100"}, KERNEL, 422, "no runner serves"),
    ({"problem": "softmax", "mode": "fast"}, KERNEL, 422, "unknown mode"),
    ({"problem": "softmax"}, b"", 422, "empty"),
    ({"problem": "softmax"}, b"  \n\t\n", 422, "empty"),
    ({"problem": "softmax"}, b"def custom_kernel(data):\n    return '\xff\xfe'\n", 422, "not UTF-8"),
    ({"problem": "softmax"}, b"#" * (MAX_CODE_BYTES + 1), 413, "limit"),
    ({"problem": "softmax"}, b"#" * (MAX_CODE_BYTES * 50), 413, "limit"),
])
def test_multipart_refusals(client: TestClient, world: World, dispatched: Recorder, fields: dict[str, str],
                            code: bytes | str, status: int, words: str) -> None:
    problem = fields.pop("problem")
    r = submit(client, world.tokens["alice"], problem, code, **fields)
    assert r.status_code == status, r.text
    assert words in r.json()["detail"]
    assert dispatched.calls == []
    assert client.get("/api/v1/submissions", headers=world.auth("alice")).json() == []


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"problem": "nope", "code": KERNEL}, 404, "unknown problem"),
    ({"problem": "softmax", "device": "tpu-v5", "code": KERNEL}, 422, "not a device queue"),
    ({"problem": "softmax", "mode": "fast", "code": KERNEL}, 422, "unknown mode"),
    ({"problem": "softmax", "code": ""}, 422, "empty"),
    ({"problem": "softmax", "code": "x = '\ud800'\n"}, 422, "not UTF-8"),
    ({"problem": "softmax", "code": "#" * (MAX_CODE_BYTES + 1)}, 413, f"limit is {MAX_CODE_BYTES} bytes"),
])
def test_json_refusals(client: TestClient, world: World, dispatched: Recorder, body: dict[str, str],
                       status: int, words: str) -> None:
    # json.dumps escapes to ASCII, so a lone surrogate travels as "\\ud800"
    r = client.post("/api/v1/submissions", content=json.dumps(body),
                    headers={**world.auth("alice"), "Content-Type": "application/json"})
    assert r.status_code == status, r.text
    assert words in r.json()["detail"]
    assert dispatched.calls == []
    assert client.get("/api/v1/submissions", headers=world.auth("alice")).json() == []


def test_malformed_requests_are_422_or_415(client: TestClient, world: World, dispatched: Recorder) -> None:
    auth = world.auth("alice")
    missing_problem = client.post("/api/v1/submissions", json={"code": KERNEL}, headers=auth)
    assert missing_problem.status_code == 422 and missing_problem.json()["detail"][0]["loc"] == ["body", "problem"]
    not_json = client.post("/api/v1/submissions", content=b"{nope", headers={**auth, "Content-Type": "application/json"})
    assert not_json.status_code == 422
    no_file = client.post("/api/v1/submissions", data={"problem": "softmax"},
                          files={"other": ("x", b"1")}, headers=auth)
    assert no_file.status_code == 422 and no_file.json()["detail"][0]["loc"] == ["body", "file"]
    raw_latin1 = client.post("/api/v1/submissions", content=b'{"problem": "softmax", "code": "x = \'\xe9\'"}',
                             headers={**auth, "Content-Type": "application/json"})
    assert raw_latin1.status_code == 422
    not_object = client.post("/api/v1/submissions", json=["softmax", KERNEL], headers=auth)
    assert not_object.status_code == 422
    text = client.post("/api/v1/submissions", content=KERNEL, headers={**auth, "Content-Type": "text/plain"})
    assert text.status_code == 415
    assert dispatched.calls == []


def test_a_device_whose_runner_went_quiet_queues_and_says_so_until_it_is_forgotten(
        client: TestClient, world: World, dispatched: Recorder) -> None:
    from kernelrank.settings import get_settings

    assert submit(client, world.tokens["alice"]).json()["message"] == ""  # a runner online: nothing to say
    _make_cpu_stale(world, 600)  # restarting for ten minutes
    r = submit(client, world.tokens["alice"])
    assert r.status_code == 202, r.text
    note = r.json()["message"]
    assert "no runner of cpu is online now" in note and "10 min ago" in note and "waits in its queue" in note
    page = client.get(f"/api/v1/submissions/{r.json()['id']}", headers=world.auth("alice")).json()
    assert page["status"] == "queued" and page["message"] == note
    _make_cpu_stale(world, get_settings().runner_remember_hours * 3600 + 60)  # gone for longer than remembered
    r = submit(client, world.tokens["alice"])
    assert r.status_code == 422
    assert "no runner serves device 'cpu'" in r.json()["detail"]
    assert len(dispatched.calls) == 2


