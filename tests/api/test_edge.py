"""Every input has an answer of its own: integers bounded where they are parsed, body
limits counted while reading (chunked included), 401 before the body, short 422s, a client that
goes away logged as such, a metrics middleware that never raises."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import KERNEL, MAX_CODE_BYTES, World, submit

HUGE = "99999999999999999999"  # > 2^63 - 1: SQLite's driver raised OverflowError on it
INT64_MAX = 2**63 - 1


@pytest.mark.parametrize("method,path", [
    ("GET", f"/api/v1/submissions/{HUGE}"),
    ("POST", f"/api/v1/submissions/{HUGE}/cancel"),
    ("GET", f"/api/v1/submissions?offset={HUGE}"),
    ("DELETE", f"/api/v1/users/me/tokens/{HUGE}"),
    ("POST", f"/api/v1/admin/submissions/{HUGE}/reinstate"),
    ("POST", f"/api/v1/admin/submissions/{HUGE}/requeue"),
    ("POST", f"/api/v1/admin/submissions/{HUGE}/clear-review"),
    ("GET", f"/submissions/{HUGE}"),
    ("GET", f"/submissions/{HUGE}/live"),
    ("GET", f"/admin/go?id={HUGE}"),
])
def test_integers_beyond_64_bits_are_422(client: TestClient, world: World, method: str, path: str) -> None:
    r = client.request(method, path, headers=world.auth("root"))
    assert r.status_code == 422, r.text


@pytest.mark.parametrize("path", [f"/api/v1/submissions/{INT64_MAX}", f"/submissions/{INT64_MAX}"])
def test_the_largest_64_bit_id_is_looked_up(client: TestClient, world: World, path: str) -> None:
    assert client.get(path, headers=world.auth("root")).status_code == 404


def test_a_page_number_past_any_offset_is_422_and_a_large_one_an_empty_page(client: TestClient, world: World) -> None:
    from tests.web.conftest import sign_in

    sign_in(client, world.tokens["alice"])
    assert client.get(f"/me/submissions?page={HUGE}").status_code == 422
    assert client.get("/me/submissions?page=1000000000").status_code == 200


def test_superscript_digits_get_their_422_and_their_log_line(client: TestClient, caplog) -> None:
    """``¹`` passes ``str.isdigit()`` and fails ``int()``: the metrics middleware used to raise
    on it after the answer, losing the request's log line."""
    with caplog.at_level(logging.INFO, logger="kernelrank.api.access"):
        r = client.get("/api/v1/submissions/\u00b9")
    assert r.status_code == 422
    lines = [rec for rec in caplog.records if rec.name == "kernelrank.api.access"]
    assert [(rec.status, rec.route) for rec in lines] == [(422, "/api/v1/submissions/{submission_id}")]
    assert not hasattr(lines[0], "submission_id")
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]


def test_validation_errors_quote_a_short_prefix_only(client: TestClient, world: World) -> None:
    long_name = "x" * 60_000  # under the 64 KiB body limit, over every field's length
    r = client.post("/api/v1/auth/token", json={"name": long_name, "password": "p" * 10})
    assert r.status_code == 422
    assert len(r.content) < 1024
    (err,) = r.json()["detail"]
    assert err["loc"] == ["body", "name"] and err["input"] == "x" * 64 + "…"
    # a whole body that is not an object: quoted as the start of its JSON text
    r = client.post("/api/v1/users/me/tokens", json=["y" * 5000], headers=world.auth("alice"))
    assert r.status_code == 422 and len(r.content) < 1024


def test_json_bodies_over_the_limit_are_413_declared_or_chunked(client: TestClient, world: World) -> None:
    body = json.dumps({"name": "n" * 70_000, "password": "x" * 8}).encode()
    r = client.post("/api/v1/auth/token", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.headers["connection"] == "close"

    def chunks():
        for _ in range(100):  # 100 x 64 KiB, sent chunked (no Content-Length)
            yield b" " * 65536

    r = client.post("/api/v1/users/me/tokens", content=chunks(),
                    headers={**world.auth("alice"), "Content-Type": "application/json"})
    assert r.status_code == 413


def test_uploads_keep_their_own_limits(client: TestClient, world: World) -> None:
    """A submission may be larger than a JSON body (up to MAX_CODE_BYTES of code), and a chunked
    one over the submission limit is refused while it is read."""
    assert submit(client, world.tokens["alice"], code=KERNEL + "#" * (MAX_CODE_BYTES - len(KERNEL) - 1)).status_code == 202

    def chunks():
        for _ in range(200):
            yield b"x" * 65536

    r = client.post("/api/v1/submissions", content=chunks(),
                    headers={**world.auth("alice"), "Content-Type": "application/json"})
    assert r.status_code == 413


def test_no_token_no_body(client: TestClient) -> None:
    """A route that needs a token answers 401 before reading the body, whatever the body is."""
    r = client.post("/api/v1/users", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    r = client.post("/api/v1/admin/problems", content=b"--x\r\nbroken", headers={
        "Content-Type": "multipart/form-data; boundary=x"})
    assert r.status_code == 401


def test_a_client_gone_mid_upload_is_logged_as_such(client: TestClient, world: World, caplog) -> None:
    """The ASGI app called directly: the body stops half-way with ``http.disconnect``."""
    app = client.app
    boundary = b"kernelrankboundary"
    head = (b"--" + boundary + b'\r\nContent-Disposition: form-data; name="problem"\r\n\r\nsoftmax\r\n--' + boundary
            + b'\r\nContent-Disposition: form-data; name="file"; filename="k.py"\r\n\r\n')
    messages = [{"type": "http.request", "body": head + b"import torch\n", "more_body": True},
                {"type": "http.disconnect"}]
    sent: list[dict] = []

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/api/v1/submissions", "raw_path": b"/api/v1/submissions", "query_string": b"",
             "root_path": "", "client": ("127.0.0.1", 5000), "server": ("testserver", 80),
             "headers": [(b"host", b"testserver"), (b"content-length", b"20000"),
                         (b"authorization", f"Bearer {world.tokens['alice']}".encode()),
                         (b"content-type", b"multipart/form-data; boundary=" + boundary)]}
    with caplog.at_level(logging.INFO):
        asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 499
    access = [rec for rec in caplog.records if rec.name == "kernelrank.api.access"]
    assert [rec.status for rec in access] == [499]
    assert any("client disconnected" in rec.getMessage() for rec in caplog.records)
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]


def test_a_client_gone_mid_json_body_is_logged_as_such(client: TestClient, caplog) -> None:
    """FastAPI parses a declared JSON body itself and answered such a disconnect 400."""
    messages = [{"type": "http.request", "body": b'{"name": "al', "more_body": True}, {"type": "http.disconnect"}]
    sent: list[dict] = []

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/api/v1/auth/token", "raw_path": b"/api/v1/auth/token", "query_string": b"", "root_path": "",
             "client": ("127.0.0.1", 5000), "server": ("testserver", 80),
             "headers": [(b"host", b"testserver"), (b"content-length", b"400"), (b"content-type", b"application/json")]}
    with caplog.at_level(logging.INFO):
        asyncio.run(client.app(scope, receive, send))
    assert sent[0]["status"] == 499
    assert [rec.status for rec in caplog.records if rec.name == "kernelrank.api.access"] == [499]


def test_metrics_show_the_pool(client: TestClient) -> None:
    from tests.api.test_metrics import scrape

    m = scrape(client)
    assert m[("kernelrank_database_connections_in_use", ())] == 0.0
    assert m[("kernelrank_database_pool_size", ())] == 15.0  # SQLAlchemy's QueuePool: 5 + 10 overflow


def test_the_schema_bounds_ids() -> None:
    from kernelrank.api.app import create_app

    schema = create_app().openapi()
    param = next(p for p in schema["paths"]["/api/v1/submissions/{submission_id}"]["get"]["parameters"]
                 if p["name"] == "submission_id")
    assert param["schema"]["maximum"] == INT64_MAX
