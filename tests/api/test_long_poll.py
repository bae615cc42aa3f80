"""Conditional and long-polled reads of a submission: ``ETag`` / ``If-None-Match`` and ``wait``
(``kernelrank.api.watch``). The waits here are woken by the database's word of a commit (SQLite's
write-ahead log through inotify): the watcher's own fallback reads are pushed past the waits, so a
missing wake-up shows as a ``304`` where the change was due."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import World, submit
from tests.api.test_metrics import scrape

URL = "/api/v1/submissions/{}"


@pytest.fixture(autouse=True)
def no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelrank.api import watch

    monkeypatch.setattr(watch, "FALLBACK_S", 120.0)


def _later(seconds: float, change) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        change()
    t = threading.Thread(target=run)
    t.start()
    return t


def _start(sid: int) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services.submissions import mark_started

    with session_scope() as s:
        mark_started(s, sid, "runner-cpu-1")


def test_a_read_carries_its_state_tag_and_an_unchanged_one_is_not_sent_again(client: TestClient, world: World) -> None:
    sid = submit(client, world.tokens["alice"], mode="test").json()["id"]
    first = client.get(URL.format(sid))
    tag = first.headers["ETag"]
    assert first.status_code == 200 and tag.startswith('W/"') and first.json()["status"] == "queued"
    same = client.get(URL.format(sid), headers={"If-None-Match": tag})
    assert same.status_code == 304 and same.headers["ETag"] == tag and same.content == b""
    assert client.get(URL.format(sid), headers={"If-None-Match": 'W/"0000000000000000"'}).status_code == 200
    _start(sid)
    after = client.get(URL.format(sid), headers={"If-None-Match": tag})
    assert after.status_code == 200 and after.json()["status"] == "running" and after.headers["ETag"] != tag


def test_a_waiting_read_answers_when_the_state_changes(client: TestClient, world: World) -> None:
    sid = submit(client, world.tokens["alice"], mode="test").json()["id"]
    tag = client.get(URL.format(sid)).headers["ETag"]
    changer = _later(0.5, lambda: _start(sid))
    r = client.get(URL.format(sid), params={"wait": 30}, headers={"If-None-Match": tag})
    changer.join()
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "running" and r.headers["ETag"] != tag
    assert client.app.state.watch.waiting() == 0


def test_a_wait_with_no_change_ends_in_304_and_other_commits_do_not_end_it(client: TestClient,
                                                                         world: World) -> None:
    sid = submit(client, world.tokens["alice"], mode="test").json()["id"]
    other = submit(client, world.tokens["bob"], mode="test").json()["id"]
    tag = client.get(URL.format(sid)).headers["ETag"]
    changer = _later(0.2, lambda: _start(other))  # a commit, but to another submission
    r = client.get(URL.format(sid), params={"wait": 1.5}, headers={"If-None-Match": tag})
    changer.join()
    assert r.status_code == 304 and r.headers["ETag"] == tag
    assert client.get(URL.format(other)).json()["status"] == "running"
    # the wait is kept out of the route's latency: long-polls have a label of their own
    m = scrape(client)
    waited = ("kernelrank_http_request_duration_seconds_count",
              (("method", "GET"), ("route", "/api/v1/submissions/{submission_id} (long-poll)"), ("status", "304")))
    assert m[waited] == 1.0
    assert m[(waited[0], (("method", "GET"), ("route", "/api/v1/submissions/{submission_id}"), ("status", "200")))] == 2.0


def test_a_wait_without_a_tag_or_beyond_the_limit(client: TestClient, world: World) -> None:
    sid = submit(client, world.tokens["alice"], mode="test").json()["id"]
    r = client.get(URL.format(sid), params={"wait": 30})  # nothing to compare with: at once
    assert r.status_code == 200 and r.json()["status"] == "queued"
    r = client.get(URL.format(sid), params={"wait": 61}, headers={"If-None-Match": r.headers["ETag"]})
    assert r.status_code == 422 and "wait" in r.text


def test_a_hidden_submission_is_not_found_before_any_wait(client: TestClient, world: World) -> None:
    from sqlalchemy import select

    from kernelrank.db.models import Problem
    from kernelrank.db.session import session_scope

    sid = submit(client, world.tokens["alice"], mode="test").json()["id"]
    tag = client.get(URL.format(sid), headers=world.auth("alice")).headers["ETag"]
    with session_scope() as s:
        s.scalars(select(Problem).where(Problem.name == "softmax")).one().hidden = True
    r = client.get(URL.format(sid), params={"wait": 30}, headers={"If-None-Match": tag, **world.auth("bob")})
    assert r.status_code == 404
    assert client.get(URL.format(sid), headers={"If-None-Match": tag, **world.auth("alice")}).status_code == 304
