"""The kernelguard signal on the submission page: admins see it beside the review mark, nobody else."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import World
from tests.api.test_guard_export import CLOCK_PATCH, ranked


def test_submission_page_shows_the_guard_to_admins_beside_the_review_mark(client: TestClient, world: World,
                                                                          browser_for) -> None:
    sid = ranked(client, world, "alice", 100.0, code=CLOCK_PATCH)
    assert "kernelguard" in browser_for("root").get(f"/submissions/{sid}").text
    assert "TIMER_MONKEYPATCH" in browser_for("root").get(f"/submissions/{sid}").text
    assert "kernelguard" not in browser_for("alice").get(f"/submissions/{sid}").text
    assert "kernelguard" not in browser_for(None).get(f"/submissions/{sid}").text
