"""The embedded filesystem broker: a consumer never sees a half-written message, and a message
is delivered to one consumer only."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from queue import Empty

import pytest
from kombu import Connection

from kernelrank.fsbroker import Transport


def connection(folder: Path) -> Connection:
    for sub in ("queue", "processed", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return Connection(transport=Transport, transport_options={
        "data_folder_in": str(folder / "queue"), "data_folder_out": str(folder / "queue"),
        "processed_folder": str(folder / "processed"), "control_folder": str(folder / "control"),
        "store_processed": False})


def test_roundtrip_in_order_and_nothing_left_behind(tmp_path: Path) -> None:
    with connection(tmp_path) as conn:
        ch = conn.channel()
        for i in range(50):  # sent within a few milliseconds: still first in, first out
            ch._put("cpu", {"n": i})
        ch._put("control", {"n": "other queue"})
        assert [ch._get("cpu")["n"] for _ in range(50)] == list(range(50))
        with pytest.raises(Empty):
            ch._get("cpu")
        assert ch._get("control") == {"n": "other queue"}
    assert os.listdir(tmp_path / "queue") == [] and os.listdir(tmp_path / "processed") == []


def test_concurrent_writer_and_consumers_see_whole_messages_once(tmp_path: Path) -> None:
    n, payload = 300, "x" * 200_000  # big messages: the write takes long enough to be caught midway
    got: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def consume() -> None:
        with connection(tmp_path) as conn:
            ch = conn.channel()
            while True:
                finished = done.is_set()  # read before listing: an empty folder after it is final
                try:
                    msg = ch._get("cpu")
                except Empty:
                    if finished:
                        return
                    continue
                except BaseException as e:  # noqa: BLE001 - recorded and asserted below
                    errors.append(e)
                    return
                assert msg["body"] == payload
                got.append(msg["n"])

    consumers = [threading.Thread(target=consume) for _ in range(2)]
    for t in consumers:
        t.start()
    with connection(tmp_path) as conn:
        ch = conn.channel()
        for i in range(n):
            ch._put("cpu", {"n": i, "body": payload})
    done.set()
    for t in consumers:
        t.join(60)
    assert not errors
    assert sorted(got) == list(range(n))


def test_a_waiting_consumer_wakes_on_a_new_message_not_on_its_next_poll(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """With no poll for an hour, a consumer already waiting still gets a message sent after it
    began to wait: the new file wakes it."""
    from kernelrank import fsbroker

    monkeypatch.setattr(fsbroker, "WATCH_FALLBACK_S", 3600.0)
    got: list[object] = []
    with connection(tmp_path) as conn:
        conn.transport_options["polling_interval"] = 3600.0
        queue = conn.SimpleQueue("wake")  # a name of its own: kombu keeps exchanges process-wide

        def consume() -> None:
            message = queue.get(timeout=120)  # raises Empty when nothing woke it
            got.append(message.payload)
            message.ack()

        waiter = threading.Thread(target=consume)
        waiter.start()
        while conn.transport._wakeup is None and waiter.is_alive():  # until it waits
            threading.Event().wait(0.01)
        with connection(tmp_path) as sender:
            sender.SimpleQueue("wake").put({"n": 1})
        waiter.join(150)
        queue.close()
    assert got == [{"n": 1}]


def test_a_message_put_back_comes_again_marked_redelivered(tmp_path: Path) -> None:
    """A worker lost with the message unacknowledged puts it back (Celery's ``reject_on_worker_lost``):
    marked ``redelivered``, so the runner waits for its go-ahead before it starts it."""
    with connection(tmp_path) as conn:
        queue = conn.SimpleQueue("back")
        queue.put({"n": 1})
        first = queue.get(timeout=10)
        assert not first.delivery_info.get("redelivered")
        first.requeue()
        again = queue.get(timeout=10)
        assert again.payload == {"n": 1} and again.delivery_info["redelivered"] is True
        again.ack()
        queue.close()
