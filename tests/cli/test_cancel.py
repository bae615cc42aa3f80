"""``kernelrank cancel ID`` against a real API (uvicorn in a thread) whose jobs are recorded, not
run, so submissions stay queued until cancelled."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from tests.api.conftest import Recorder, World, database, dispatched, migrated_template, real_problems, world  # noqa: F401 - fixtures
from tests.e2e.conftest import free_port


@pytest.fixture
def server(world: World, dispatched: Recorder) -> Iterator[str]:
    import uvicorn

    from kernelrank.api.app import create_app
    from kernelrank.api.deps import get_dispatch

    app = create_app()
    app.dependency_overrides[get_dispatch] = lambda: dispatched
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning",
                                        lifespan="off"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{srv.config.port}"
    finally:
        srv.should_exit = True
        thread.join(15)


def _cancel(url: str, token: str, *args: str):
    from kernelrank.cli.main import app

    return CliRunner().invoke(app, ["cancel", *args, "--server", url, "--token", token])


def test_cancel_a_queued_submission_then_refuse_a_second_time(server: str, world: World) -> None:
    import httpx

    with httpx.Client(base_url=server, headers=world.auth("alice")) as c:
        r = c.post("/api/v1/submissions", data={"problem": "softmax", "mode": "test"},
                   files={"file": ("k.py", b"import torch\ndef custom_kernel(d):\n    return torch.softmax(d[0], -1)\n")})
        sid = r.json()["id"]
    res = _cancel(server, world.tokens["alice"], str(sid), "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["status"] == "cancelled"
    res = _cancel(server, world.tokens["alice"], str(sid))
    assert res.exit_code == 2
    assert "only a queued submission can be cancelled (HTTP 409)" in res.output
    res = _cancel(server, world.tokens["bob"], "999999")
    assert res.exit_code == 2 and "HTTP 404" in res.output
