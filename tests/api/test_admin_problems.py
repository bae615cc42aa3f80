"""Problem administration over the API: pushing a problem (validated against its own reference,
safely unpacked), revisions with their own leaderboards, closing with a deadline, hiding.

Two tests run the real reference check (the harness in a subprocess, a few seconds each); the
others use a recording stand-in so they test the service, not the harness, again."""

from __future__ import annotations

import datetime as dt
import io
import tarfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from kernelrank.problems import ProblemSpec
from kernelrank.services.problem_admin import pack_folder
from tests.api.conftest import World, passed_result, record, submit

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
DOUBLE_YAML = FIXTURES / "problems" / "double" / "problem.yaml"
DOUBLE_REF = FIXTURES / "reference_kernels" / "double"


class PassingCheck:
    """A reference check that records the specs it saw and passes them all."""

    def __init__(self) -> None:
        self.specs: list[ProblemSpec] = []

    def __call__(self, spec: ProblemSpec) -> None:
        self.specs.append(spec)
        return None


@pytest.fixture
def checks(client: TestClient) -> PassingCheck:
    """Replace the harness check by :class:`PassingCheck` for this test's client."""
    from kernelrank.api.deps import get_reference_check

    check = PassingCheck()
    client.app.dependency_overrides[get_reference_check] = lambda: check
    return check


def double_folder(tmp_path: Path, reference_edit=None, yaml_edit=None) -> tuple[Path, Path]:
    """A copy of the ``double`` fixture (``problems/double``, ``reference_kernels/double``),
    optionally edited."""
    import shutil

    problems_dir = tmp_path / "src" / "problems" / "double"
    ref_dir = tmp_path / "src" / "reference_kernels" / "double"
    problems_dir.mkdir(parents=True)
    shutil.copy(DOUBLE_YAML, problems_dir / "problem.yaml")
    shutil.copytree(DOUBLE_REF, ref_dir, ignore=shutil.ignore_patterns("__pycache__"))
    if reference_edit:
        (ref_dir / "reference.py").write_text(reference_edit((ref_dir / "reference.py").read_text()))
    if yaml_edit:
        (problems_dir / "problem.yaml").write_text(yaml_edit((problems_dir / "problem.yaml").read_text()))
    return problems_dir / "problem.yaml", ref_dir


def push(client: TestClient, world: World, archive: bytes, user: str = "root", **fields: str):
    return client.post("/api/v1/admin/problems", files={"archive": ("double.tar.gz", archive, "application/gzip")},
                       data=fields, headers=world.auth(user))


def tar_of(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def file_member(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


# -- pushing, with the real reference check ---------------------------------------------------------
def test_push_a_valid_problem_creates_it(client: TestClient, world: World) -> None:
    from kernelrank.problems import load_problem

    r = push(client, world, pack_folder(DOUBLE_YAML, DOUBLE_REF))
    assert r.status_code == 201, r.text
    body = r.json()
    on_disk = load_problem("double", FIXTURES / "problems", FIXTURES / "reference_kernels")
    assert body == {"name": "double", "revision": on_disk.revision, "new_problem": True, "new_revision": True,
                    "state": "open"}
    problem = client.get("/api/v1/problems/double").json()
    assert problem["revision"] == on_disk.revision and problem["title"] == "Double a vector"
    assert "double" in [p["name"] for p in client.get("/api/v1/problems").json()]
    # the new problem takes submissions at once
    sub = submit(client, world.tokens["alice"], "double", code="def custom_kernel(data):\n    return data[0] * 2\n")
    assert sub.status_code == 202, sub.text


def test_push_rejects_a_reference_that_fails_its_own_tests_with_the_reason(
        client: TestClient, world: World, tmp_path: Path) -> None:
    # ref_kernel fails on the second test case (N=1000): the harness reports it
    yaml_path, ref_dir = double_folder(tmp_path, reference_edit=lambda src: src.replace(
        '    return data[0] * 2\n',
        '    if data[0].numel() > 100:\n        raise ValueError("reference broken for large N")\n'
        '    return data[0] * 2\n'))
    r = push(client, world, pack_folder(yaml_path, ref_dir))
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail.startswith("the reference fails its own tests: error")
    assert "reference broken for large N" in detail
    assert client.get("/api/v1/problems/double").status_code == 404  # nothing stored


# -- pushing: validation before the check -----------------------------------------------------------
def test_push_is_for_admins_only(client: TestClient, world: World, checks: PassingCheck) -> None:
    archive = pack_folder(DOUBLE_YAML, DOUBLE_REF)
    assert push(client, world, archive, user="alice").status_code == 403
    assert client.post("/api/v1/admin/problems", files={"archive": ("a.tgz", archive)}).status_code == 401
    assert checks.specs == []


@pytest.mark.parametrize("member", [
    file_member("../evil.py", b"print('escaped')"),
    file_member("reference/../../evil.py", b"x"),
    file_member("/etc/evil.py", b"x"),
    file_member("reference\\..\\evil.py", b"x"),
])
def test_push_refuses_path_traversal(client: TestClient, world: World, checks: PassingCheck, tmp_path: Path,
                                     member: tuple[tarfile.TarInfo, bytes]) -> None:
    archive = tar_of([file_member("problem.yaml", DOUBLE_YAML.read_bytes()),
                      file_member("reference/reference.py", (DOUBLE_REF / "reference.py").read_bytes()), member])
    r = push(client, world, archive)
    assert r.status_code == 422, r.text
    assert repr(member[0].name) in r.json()["detail"]
    assert checks.specs == []
    assert client.get("/api/v1/problems/double").status_code == 404


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.FIFOTYPE])
def test_push_refuses_links_and_special_files(client: TestClient, world: World, checks: PassingCheck,
                                              kind: bytes) -> None:
    link = tarfile.TarInfo("reference/templates/link.py")
    link.type = kind
    link.linkname = "/etc/passwd"
    archive = tar_of([file_member("problem.yaml", DOUBLE_YAML.read_bytes()),
                      file_member("reference/reference.py", (DOUBLE_REF / "reference.py").read_bytes()),
                      (link, None)])
    r = push(client, world, archive)
    assert r.status_code == 422 and "only regular files" in r.json()["detail"]


def test_push_refuses_oversized_uploads(client: TestClient, world: World, checks: PassingCheck) -> None:
    import os

    from kernelrank.settings import get_settings

    limit = get_settings().max_problem_bytes
    big = tar_of([file_member("problem.yaml", DOUBLE_YAML.read_bytes()),
                  file_member("reference/reference.py", (DOUBLE_REF / "reference.py").read_bytes()),
                  file_member("reference/examples/big.bin", b"\0" * (limit + 1))])  # compresses small
    r = push(client, world, big)
    assert r.status_code == 413 and "unpacked" in r.json()["detail"]
    r = push(client, world, os.urandom(limit + 10))
    assert r.status_code == 413


@pytest.mark.parametrize("archive, message", [
    (b"not a tar archive at all", "not a readable tar archive"),
    (tar_of([file_member("reference/reference.py", b"x")]), "no problem.yaml"),
    (tar_of([file_member("problem.yaml", b"name: Bad Name\n")]), "'name' must be"),
    (tar_of([file_member("problem.yaml", b"name: double\ntitle: t\n")]), "invalid problem definition"),
    (tar_of([file_member("problem.yaml", DOUBLE_YAML.read_bytes())]), "reference.py"),
    (tar_of([file_member("problem.yaml", DOUBLE_YAML.read_bytes()), file_member("notes.txt", b"x")]),
     "expected problem.yaml and files under reference/"),
])
def test_push_refuses_malformed_uploads_with_a_reason(client: TestClient, world: World, checks: PassingCheck,
                                                      archive: bytes, message: str) -> None:
    r = push(client, world, archive)
    assert r.status_code == 422, r.text
    assert message in r.json()["detail"]
    assert "/tmp" not in r.json()["detail"] and "kernelrank-push-" not in r.json()["detail"]


def test_push_needs_a_multipart_archive(client: TestClient, world: World, checks: PassingCheck) -> None:
    r = client.post("/api/v1/admin/problems", json={"archive": "x"}, headers=world.auth("root"))
    assert r.status_code == 422


# -- revisions --------------------------------------------------------------------------------------
def test_revising_makes_a_new_revision_and_the_old_leaderboard_stays_readable(
        client: TestClient, world: World, checks: PassingCheck, tmp_path: Path) -> None:
    first = push(client, world, pack_folder(DOUBLE_YAML, DOUBLE_REF)).json()
    sid = submit(client, world.tokens["alice"], "double").json()["id"]
    record(sid, "public", passed_result(500.0))
    record(sid, "secret", passed_result(501.0))
    board = client.get("/api/v1/leaderboards/double/cpu").json()
    assert board["revision"] == first["revision"] and [r["submission_id"] for r in board["rows"]] == [sid]

    yaml_path, ref_dir = double_folder(tmp_path, yaml_edit=lambda y: y.replace("{N: 10, seed: 1}", "{N: 12, seed: 1}"))
    second = push(client, world, pack_folder(yaml_path, ref_dir))
    assert second.status_code == 201, second.text
    second = second.json()
    assert second["new_problem"] is False and second["new_revision"] is True
    assert second["revision"] != first["revision"]
    assert len(checks.specs) == 2 and checks.specs[1].revision == second["revision"]

    # the current board is the new revision's, empty; the old one is still there by revision
    now = client.get("/api/v1/leaderboards/double/cpu").json()
    assert now["revision"] == second["revision"] and now["rows"] == []
    old = client.get("/api/v1/leaderboards/double/cpu", params={"revision": first["revision"][:10]}).json()
    assert old["revision"] == first["revision"] and [r["submission_id"] for r in old["rows"]] == [sid]
    old_problem = client.get("/api/v1/problems/double", params={"revision": first["revision"]}).json()
    assert old_problem["is_current"] is False and old_problem["tests"][0]["N"] == 10
    assert client.get("/api/v1/problems/double").json()["tests"][0]["N"] == 12

    revs = client.get("/api/v1/problems/double/revisions").json()
    assert [(r["number"], r["revision"], r["is_current"]) for r in revs] == [
        (1, first["revision"], False), (2, second["revision"], True)]
    # new submissions go to the new revision
    sub = submit(client, world.tokens["bob"], "double").json()["id"]
    assert client.get(f"/api/v1/submissions/{sub}").json()["revision"] == second["revision"]

    # pushing the first content again makes it current again, without a new revision
    again = push(client, world, pack_folder(DOUBLE_YAML, DOUBLE_REF)).json()
    assert again["revision"] == first["revision"] and again["new_revision"] is False
    assert client.get("/api/v1/leaderboards/double/cpu").json()["revision"] == first["revision"]


def test_unknown_and_malformed_revisions(client: TestClient, world: World) -> None:
    assert client.get("/api/v1/leaderboards/softmax/cpu", params={"revision": "0" * 64}).status_code == 404
    r = client.get("/api/v1/leaderboards/softmax/cpu", params={"revision": "xyz"})
    assert r.status_code == 422 and "hex" in r.json()["detail"]
    assert client.get("/api/v1/problems/softmax", params={"revision": "abc"}).status_code == 422


# -- open, close, hide ------------------------------------------------------------------------------
def _close(client: TestClient, world: World, name: str, deadline: dt.datetime | None = None, user: str = "root"):
    body = {"deadline": deadline.isoformat()} if deadline else None
    return client.post(f"/api/v1/admin/problems/{name}/close", json=body, headers=world.auth(user))


def test_close_now_refuses_leaderboard_submissions_but_ranks_earlier_ones(client: TestClient, world: World) -> None:
    early = submit(client, world.tokens["alice"], "softmax").json()["id"]
    r = _close(client, world, "softmax")
    assert r.status_code == 200 and r.json()["state"] == "closed" and r.json()["deadline"]

    late = submit(client, world.tokens["bob"], "softmax")
    assert late.status_code == 409 and "closed" in late.json()["detail"]
    assert submit(client, world.tokens["bob"], "softmax", mode="test").status_code == 202  # still judged

    record(early, "public", passed_result(700.0))
    record(early, "secret", passed_result(701.0))
    rows = client.get("/api/v1/leaderboards/softmax/cpu").json()["rows"]
    assert [r["submission_id"] for r in rows] == [early]  # made before the deadline: ranked
    assert [p["state"] for p in client.get("/api/v1/problems").json() if p["name"] == "softmax"] == ["closed"]

    r = client.post("/api/v1/admin/problems/softmax/open", headers=world.auth("root"))
    assert r.status_code == 200 and r.json() == {"name": "softmax", "state": "open", "hidden": False, "deadline": None}
    assert submit(client, world.tokens["bob"], "softmax").status_code == 202


def test_a_submission_made_after_the_deadline_is_never_ranked(client: TestClient, world: World) -> None:
    future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
    r = _close(client, world, "softmax", future)
    assert r.status_code == 200 and r.json()["state"] == "open"  # the deadline is ahead
    sid = submit(client, world.tokens["alice"], "softmax").json()["id"]
    # the deadline is moved before the submission was made (it is judged after that)
    _close(client, world, "softmax", dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1))
    record(sid, "public", passed_result(700.0))
    record(sid, "secret", passed_result(701.0))
    sub = client.get(f"/api/v1/submissions/{sid}").json()
    assert sub["status"] == "passed" and sub["ranked"] is False
    assert client.get("/api/v1/leaderboards/softmax/cpu").json()["rows"] == []


def test_a_deadline_needs_a_time_zone(client: TestClient, world: World) -> None:
    r = client.post("/api/v1/admin/problems/softmax/close", json={"deadline": "2030-01-01T00:00:00"},
                    headers=world.auth("root"))
    assert r.status_code == 422 and "time zone" in r.json()["detail"]


def test_hidden_problems_are_404_to_everyone_but_admins(client: TestClient, world: World) -> None:
    r = client.post("/api/v1/admin/problems/gemm/hide", headers=world.auth("root"))
    assert r.status_code == 200 and r.json()["state"] == "hidden"

    for headers in ({}, world.auth("alice"), {"Authorization": "Bearer kr_wrong"}):
        assert "gemm" not in [p["name"] for p in client.get("/api/v1/problems", headers=headers).json()]
        r = client.get("/api/v1/problems/gemm", headers=headers)
        assert r.status_code == 404 and "gemm" not in r.json()["detail"].split("known:")[1]
        assert client.get("/api/v1/leaderboards/gemm/cpu", headers=headers).status_code == 404
        assert client.get("/api/v1/problems/gemm/revisions", headers=headers).status_code == 404
    assert submit(client, world.tokens["alice"], "gemm").status_code == 404

    # admins see it, and may submit to it (to try it before opening it)
    assert "gemm" in [p["name"] for p in client.get("/api/v1/problems", headers=world.auth("root")).json()]
    assert client.get("/api/v1/problems/gemm", headers=world.auth("root")).json()["state"] == "hidden"
    assert client.get("/api/v1/leaderboards/gemm/cpu", headers=world.auth("root")).status_code == 200
    assert submit(client, world.tokens["root"], "gemm", mode="test").status_code == 202

    # a hidden problem's submissions: their owner's and admins' only
    sid = submit(client, world.tokens["root"], "gemm", mode="test").json()["id"]
    assert client.get(f"/api/v1/submissions/{sid}").status_code == 404
    assert client.get(f"/api/v1/submissions/{sid}", headers=world.auth("alice")).status_code == 404
    assert client.get(f"/api/v1/submissions/{sid}", headers=world.auth("root")).status_code == 200

    assert client.post("/api/v1/admin/problems/gemm/unhide", headers=world.auth("root")).json()["state"] == "open"
    assert client.get(f"/api/v1/submissions/{sid}").status_code == 200
    assert client.get("/api/v1/problems/gemm").status_code == 200


def test_a_new_problem_may_be_pushed_hidden(client: TestClient, world: World, checks: PassingCheck) -> None:
    r = push(client, world, pack_folder(DOUBLE_YAML, DOUBLE_REF), hidden="true")
    assert r.status_code == 201 and r.json()["state"] == "hidden"
    assert client.get("/api/v1/problems/double").status_code == 404
    assert client.get("/api/v1/problems/double", headers=world.auth("root")).status_code == 200


def test_state_changes_are_admin_only(client: TestClient, world: World) -> None:
    for action in ("open", "close", "hide", "unhide"):
        assert client.post(f"/api/v1/admin/problems/softmax/{action}", headers=world.auth("alice")).status_code == 403
        assert client.post(f"/api/v1/admin/problems/softmax/{action}").status_code == 401
        assert client.post(f"/api/v1/admin/problems/nope/{action}", headers=world.auth("root")).status_code == 404
    assert client.get("/api/v1/problems/softmax").json()["state"] == "open"
