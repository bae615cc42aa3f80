"""``/healthz`` and ``/readyz``: readiness checks the database and the broker, answers 503 naming
what failed, and never shows a URL or a password."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from tests.api.conftest import World


def _ready(settings) -> tuple[int, dict]:
    from kernelrank.api.app import create_app

    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        r = c.get("/readyz")
        assert c.get("/healthz").json() == {"status": "ok"}  # liveness never depends on them
    return r.status_code, r.json()


def test_ready_with_the_embedded_database_and_broker(client: TestClient, world: World) -> None:
    r = client.get("/readyz")
    assert r.status_code == 200
    assert r.json() == {"status": "ready", "checks": {"database": "ok", "broker": "ok"}}


def test_an_unreachable_database_is_503_without_its_url(tmp_path: Path) -> None:
    from kernelrank.settings import Settings

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    status, body = _ready(Settings(database_url=f"sqlite:///{blocker}/secretname.db", data_dir=tmp_path / "data"))
    assert status == 503
    assert body["status"] == "unavailable" and body["checks"]["broker"] == "ok"
    assert body["checks"]["database"].startswith("unavailable (")
    assert "secretname" not in str(body) and str(tmp_path) not in str(body)


def test_an_unwritable_broker_folder_is_503(tmp_path: Path) -> None:
    from kernelrank.settings import Settings

    data = tmp_path / "data"
    data.mkdir()
    (data / "broker").write_text("a file where the broker's folder should be")
    status, body = _ready(Settings(database_url=f"sqlite:///{tmp_path / 'k.db'}", data_dir=data))
    assert status == 503
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["broker"].startswith("message folder 'queue' cannot be created")


def test_an_unreachable_broker_is_503_without_its_password(tmp_path: Path) -> None:
    from kernelrank.settings import Settings
    from tests.e2e.conftest import free_port

    url = f"redis://:hunter2secret@127.0.0.1:{free_port()}/0"  # nothing listens there
    status, body = _ready(Settings(database_url=f"sqlite:///{tmp_path / 'k.db'}", data_dir=tmp_path / "d",
                                   broker_url=url))
    assert status == 503
    assert body["checks"]["broker"].startswith("unreachable (")
    assert "hunter2secret" not in str(body) and "redis://" not in str(body)
