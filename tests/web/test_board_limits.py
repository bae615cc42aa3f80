"""An admin's limits per board and mode (kernelrank/services/limits.py): each user may make so many
submissions of a mode to a board in any rolling hour; over it, a 429 that says when the next is
allowed, through the API and the submit form alike."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import KERNEL, World, record, submit
from tests.web.conftest import csrf_of

API = "/api/v1"


def _admin(world: World) -> dict[str, str]:
    return {"Authorization": f"Bearer {world.tokens['root']}"}


def _limit(client: TestClient, world: World, per_hour: int, mode: str = "test", problem: str = "softmax"):
    return client.put(f"{API}/admin/limits", headers=_admin(world),
                      json={"problem": problem, "device": "cpu", "mode": mode, "per_hour": per_hour})


def test_a_board_limit_refuses_the_next_submission_and_says_when_it_is_allowed(client: TestClient,
                                                                                world: World) -> None:
    r = _limit(client, world, 2)
    assert r.status_code == 200 and r.json() == [{"problem": "softmax", "device": "cpu", "mode": "test", "per_hour": 2}]
    first = submit(client, world.tokens["alice"], "softmax", mode="test")
    assert first.status_code == 202 and submit(client, world.tokens["alice"], "softmax", mode="test").status_code == 202
    over = submit(client, world.tokens["alice"], "softmax", mode="test")
    assert over.status_code == 429, over.text
    detail = over.json()["detail"]
    assert "this board takes 2 per hour from each user: the next is allowed at" in detail and "UTC" in detail
    assert 3590 <= int(over.headers["Retry-After"]) <= 3600
    # another mode, another user, the admin: not this limit
    assert submit(client, world.tokens["alice"], "softmax", mode="benchmark").status_code == 202
    assert submit(client, world.tokens["bob"], "softmax", mode="test").status_code == 202
    assert submit(client, world.tokens["root"], "softmax", mode="test").status_code == 202
    # a failed submission does not count (as the hourly quota counts)
    record(first.json()["id"], "public", {"status": "failed", "mode": "test", "message": "wrong", "cases": []})
    assert submit(client, world.tokens["alice"], "softmax", mode="test").status_code == 202
    # 0 removes it
    assert _limit(client, world, 0).json() == []
    assert submit(client, world.tokens["alice"], "softmax", mode="test").status_code == 202


def test_the_submit_form_is_limited_as_the_api_is(client: TestClient, world: World, browser_for) -> None:
    assert _limit(client, world, 1).status_code == 200
    alice = browser_for("alice")
    token = csrf_of(alice.get("/problems/softmax").text)
    form = {"csrf": token, "device": "cpu", "mode": "test", "code": KERNEL}
    assert alice.post("/problems/softmax/submit", data=form, follow_redirects=False).status_code == 303
    r = alice.post("/problems/softmax/submit", data=form, follow_redirects=False)
    assert r.status_code == 429 and "the next is allowed at" in r.text


def test_only_admins_set_limits_and_bad_ones_are_refused(client: TestClient, world: World) -> None:
    alice = {"Authorization": f"Bearer {world.tokens['alice']}"}
    body = {"problem": "softmax", "device": "cpu", "mode": "test", "per_hour": 1}
    assert client.put(f"{API}/admin/limits", headers=alice, json=body).status_code == 403
    assert client.get(f"{API}/admin/limits", headers=alice).status_code == 403
    assert _limit(client, world, 1, problem="nope").status_code == 404
    r = _limit(client, world, 1, mode="fast")
    assert r.status_code == 422 and "unknown mode 'fast'" in r.text
    r = client.put(f"{API}/admin/limits", headers=_admin(world), json={**body, "device": "gpu"})
    assert r.status_code == 422 and "not a device queue" in r.text
    assert client.put(f"{API}/admin/limits", headers=_admin(world), json={**body, "per_hour": -1}).status_code == 422
    assert client.get(f"{API}/admin/limits", headers=_admin(world)).json() == []
