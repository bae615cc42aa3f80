"""``kernelrank runner`` and ``kernelrank serve`` without starting the service: queue choice,
what is printed about the broker, the first start's admin, and supervising children."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest
import typer

from kernelrank.cli import runner_cmd, serve
from kernelrank.cli.runner_cmd import choose_queue, mask_url


def test_mask_url_hides_credentials() -> None:
    assert mask_url("redis://user:s3cret@redis:6379/0") == "redis://***@redis:6379/0"
    assert mask_url("redis://:s3cret@redis:6379/0") == "redis://***@redis:6379/0"
    assert mask_url("redis://redis:6379/0") == "redis://redis:6379/0"
    assert "s3cret" not in runner_cmd.broker_description("amqp://u:s3cret@mq//", "/x")
    assert runner_cmd.broker_description("filesystem://", "/data/broker") == "filesystem broker in /data/broker"


def test_queue_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_cmd, "gpu_name", lambda: None)
    assert choose_queue("cpu", None) == "cpu"
    assert choose_queue("auto", None) == "cpu"
    assert choose_queue("auto", "cuda-h100") == "cuda-h100"
    with pytest.raises(typer.BadParameter, match="no CUDA device"):
        choose_queue("cuda", None)
    with pytest.raises(typer.BadParameter, match="for cuda runners"):
        choose_queue("cpu", "cuda-h100")
    with pytest.raises(typer.BadParameter, match="not a device queue"):
        choose_queue("auto", "control")
    monkeypatch.setattr(runner_cmd, "gpu_name", lambda: "NVIDIA H100 80GB HBM3")
    assert choose_queue("auto", None) == "cuda-h100-sxm"
    assert choose_queue("cuda", None) == "cuda-h100-sxm"
    # --device takes a device queue, as submit and leaderboard do
    assert choose_queue("cuda-a100") == "cuda-a100" and choose_queue("cpu") == "cpu"
    with pytest.raises(typer.BadParameter, match="not a device queue"):
        choose_queue("gpu")


def test_gpu_name_asks_a_subprocess_and_finds_none_here() -> None:
    import torch

    assert runner_cmd.gpu_name() == (torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)


def test_worker_consumes_one_queue_one_job_at_a_time() -> None:
    argv = runner_cmd.worker_argv("cpu")
    joined = " ".join(argv)
    for flag in ("--queues cpu", "--concurrency 1", "--pool prefork", "--prefetch-multiplier 1",
                 "--without-gossip", "--without-mingle", "--without-heartbeat"):
        assert flag in joined


def test_prepare_creates_the_admin_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelrank.db import session as db_session
    from kernelrank.settings import get_settings

    monkeypatch.setenv("KERNELRANK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("KERNELRANK_DATABASE_URL", raising=False)

    def clear() -> None:
        get_settings.cache_clear()
        db_session.get_sessionmaker.cache_clear()
        db_session.get_engine.cache_clear()

    clear()
    try:
        token = serve.prepare(tmp_path / "data")
        assert token and token.startswith("kr_")
        assert serve.prepare(tmp_path / "data") is None
        from kernelrank.services import problems, users

        with db_session.session_scope() as s:
            admin = users.authenticate(s, token)
            assert admin is not None and admin.name == "admin" and admin.is_admin
            assert {r.problem.name for r in problems.list_current(s)} >= {"softmax", "gemm", "mla_decode"}
    finally:
        db_session.get_engine().dispose()
        clear()


def test_supervise_stops_everything_when_one_child_dies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serve, "GRACE_SECONDS", 2.0)
    sleeper = serve.Child("sleeper", [sys.executable, "-c", "import time; time.sleep(120)"], tmp_path / "sleeper.log")
    # ignores SIGTERM: killed after the grace period
    stubborn = serve.Child("stubborn", [sys.executable, "-c",
                                        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                        "print('up', flush=True); time.sleep(120)"], tmp_path / "stubborn.log")
    dying = serve.Child("dying", [sys.executable, "-c", "import time, sys; time.sleep(1); sys.exit(3)"],
                        tmp_path / "dying.log")
    said: list[str] = []
    started = time.monotonic()
    status = serve.supervise([sleeper, stubborn, dying], {"PATH": "/usr/bin:/bin"}, said.append)
    assert status == 1
    assert time.monotonic() - started < serve.GRACE_SECONDS + 20
    assert any("dying exited with status 3" in m for m in said), said
    assert sleeper.proc is not None and sleeper.proc.returncode == -signal.SIGTERM
    assert stubborn.proc is not None and stubborn.proc.returncode == -signal.SIGKILL
    assert "up" in (tmp_path / "stubborn.log").read_text()


def test_supervise_stops_cleanly_on_sigterm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import threading

    monkeypatch.setattr(serve, "GRACE_SECONDS", 5.0)
    sleeper = serve.Child("sleeper", [sys.executable, "-c", "import time; time.sleep(120)"], tmp_path / "sleeper.log")
    said: list[str] = []
    before = signal.getsignal(signal.SIGTERM)
    # supervise installs its handler before starting anything; the signal comes well after
    threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    assert serve.supervise([sleeper], {"PATH": "/usr/bin:/bin"}, said.append) == 0
    assert said == ["serve: SIGTERM: stopping"]
    assert sleeper.proc is not None and sleeper.proc.returncode == -signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before


def test_supervise_says_ready_once_when_the_service_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import threading

    monkeypatch.setattr(serve, "READY_POLL_S", 0.1)
    sleeper = serve.Child("sleeper", [sys.executable, "-c", "import time; time.sleep(120)"], tmp_path / "sleeper.log")
    asks: list[float] = []

    def ready() -> str | None:
        asks.append(time.monotonic())
        if len(asks) < 3:
            raise RuntimeError("database not migrated yet")  # asked again, never fatal
        return None if len(asks) < 5 else "runner r1 takes cpu jobs"

    said: list[str] = []
    threading.Timer(4.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    assert serve.supervise([sleeper], {"PATH": "/usr/bin:/bin"}, said.append, ready=ready) == 0
    ready_lines = [m for m in said if m.startswith("serve: ready:")]
    assert len(ready_lines) == 1 and "runner r1 takes cpu jobs" in ready_lines[0] and len(asks) == 5


def test_supervise_kills_orphaned_grandchildren(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process left behind by a dead judge (its own session, like a judged kernel) is adopted
    by serve and killed, not left running."""
    import os
    import threading

    monkeypatch.setattr(serve, "GRACE_SECONDS", 5.0)
    pid_file = tmp_path / "orphan.pid"
    orphan = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    judge = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {orphan!r}], start_new_session=True)"
    runner = serve.Child("runner", [sys.executable, "-c",
                                    f"import subprocess, sys, time; subprocess.run([sys.executable, '-c', {judge!r}]); "
                                    "time.sleep(120)"], tmp_path / "runner.log")
    seen: dict[str, bool] = {}

    def check_then_stop() -> None:
        deadline = time.monotonic() + 20
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        pid = int(pid_file.read_text())
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                seen["killed"] = True
                break
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Timer(1.0, check_then_stop).start()
    assert serve.supervise([runner], {"PATH": "/usr/bin:/bin"}, lambda _m: None) == 0
    assert seen.get("killed"), "the orphan outlived its judge while serve ran"
    assert runner.proc is not None and runner.proc.returncode == -signal.SIGTERM
