"""The self-test in a process of its own, as a starting runner runs it (CUDA must not be
initialised in the worker's main process): its progress heard line by line, its summary read
from its last line, a crash or a run past its time a failed self-test."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import threading
from typing import Any, Callable


def run_self_test_process(device: str, scope: str = "quick", cached: bool = True, timeout: float = 3600.0,
                          on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run ``python -m kernelrank.runner.host.selftest --json`` for ``device`` in a subprocess (CUDA must
    not be initialised in the worker's main process) and return its summary; its table goes to
    this process's stderr. ``scope``: one of ``selftest.SCOPES``. ``cached``: the probes alone where this host passed before
    (:mod:`~kernelrank.runner.host.selftest_cache`). ``on_progress(done, total)`` hears each step
    as it starts. A self-test that crashes or runs past ``timeout`` seconds is a failed one."""
    argv = [sys.executable, "-m", "kernelrank.runner.host.selftest", "--device", device, "--scope", scope, "--json"]
    argv += ["--cached"] if cached else []
    at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        proc.kill()

    timer = threading.Timer(timeout, kill)
    timer.start()
    last = ""
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.strip()
            try:
                progress = json.loads(line).get("progress") if line.startswith("{") else None
            except ValueError:
                progress = None
            if progress is not None:
                if on_progress is not None:
                    on_progress(int(progress[0]), int(progress[1]))
            elif line:
                last = line
        proc.wait()
    finally:
        timer.cancel()
    if killed.is_set():
        return {"status": "failed", "at": at, "device": device, "failures": [f"the self-test ran past {timeout:.0f} s"]}
    try:
        summary = json.loads(last)
    except ValueError:
        return {"status": "failed", "at": at, "device": device,
                "failures": [f"the self-test exited with code {proc.returncode} and no summary"]}
    if proc.returncode != 0:
        summary["status"] = "failed"
    return summary
