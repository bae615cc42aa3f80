"""Per-job cgroups (runner/containment/cgroups.py): layouts, freezing, killing, limits."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelrank.runner.containment import cgroups

LAYOUT = cgroups.detect()
needs_cgroups = pytest.mark.skipif(LAYOUT.freezer is None,
                                   reason="no writable cgroup freezer on this machine (not root, no delegation)")


def _cpu_ns(pid: int) -> int:
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            total += int(f.read().split()[0])
    return total


def test_layouts_are_told_apart(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu memory pids\n")
    assert cgroups.detect(str(v2)).name == "v2"
    assert set(cgroups.detect(str(v2)).controllers) == {"pids", "memory", "cpu"}
    hybrid = tmp_path / "hybrid"
    (hybrid / "unified").mkdir(parents=True)
    (hybrid / "unified" / "cgroup.procs").write_text("")
    for c in ("pids", "memory", "freezer"):
        (hybrid / c).mkdir()
    layout = cgroups.detect(str(hybrid))
    assert layout.name == "hybrid" and layout.freezer == ("v2", hybrid / "unified")
    assert set(layout.controllers) == {"pids", "memory"}
    v1 = tmp_path / "v1"
    for c in ("freezer", "pids"):
        (v1 / c).mkdir(parents=True)
    assert cgroups.detect(str(v1)).name == "v1"
    assert cgroups.detect(str(tmp_path / "nothing")).name == "none"


@needs_cgroups
def test_a_frozen_group_runs_nothing_and_is_killed_whole() -> None:
    """A busy process and a grandchild that left its session: frozen, neither uses CPU; thawed,
    they run again; killed, the group is empty (a zombie leader's live thread included)."""
    group = cgroups.JobGroup(f"test-{os.getpid()}-freeze", LAYOUT, pids_max=64)
    script = ("import os, threading, time\n"
              "if os.fork() == 0:\n"
              "    os.setsid()\n"
              "    threading.Thread(target=lambda: [sum(range(1000)) for _ in iter(int, 1)]).start()\n"
              "    import ctypes; ctypes.CDLL(None).pthread_exit(None)\n"
              "while True: sum(range(1000))\n")
    join = "".join(f"open({p!r}, 'w').write('0')\n" for p in group.procs_files())
    proc = subprocess.Popen([sys.executable, "-c", join + script])
    try:
        deadline = time.monotonic() + 10
        while len(group.pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        members = group.pids()
        assert len(members) >= 2 and proc.pid in members
        group.freeze()
        before = {p: _cpu_ns(p) for p in members}
        time.sleep(0.3)
        assert {p: _cpu_ns(p) for p in members} == before
        group.thaw()
        time.sleep(0.3)
        assert sum(_cpu_ns(p) for p in members) > sum(before.values())
        assert group.kill() == 0
        assert group.live_pids() == set()
        # the grandchild's leader is a zombie whose thread spun on: no thread of any member runs
        assert not any(cgroups._has_live_thread(p) for p in set(members) | group.pids())
        proc.wait(timeout=5)
    finally:
        group.kill()
        proc.kill()
        proc.wait()
        group.remove()


@needs_cgroups
def test_groups_of_dead_judges_are_swept() -> None:
    """A judge killed outright leaves its child frozen in its group; the next group made sweeps
    every group named after a judge pid that no longer exists, and leaves the others."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid is free now (and unlikely to be reused within this test)
    stale = cgroups.JobGroup(f"job-{dead.pid}-1", LAYOUT, pids_max=16)
    mine = cgroups.JobGroup(f"job-{os.getpid()}-sweep", LAYOUT)
    join = "".join(f"open({p!r}, 'w').write('0')\n" for p in stale.procs_files())
    proc = subprocess.Popen([sys.executable, "-c", join + "while True: sum(range(1000))\n"])
    try:
        deadline = time.monotonic() + 10
        while not stale.pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.pid in stale.pids()
        stale.freeze()
        assert cgroups.sweep_stale(LAYOUT) == [stale.name]
        assert proc.wait(timeout=10) == -9
        assert not stale.freezer_dir.exists()
        assert mine.freezer_dir.exists()  # a live judge's group stays
    finally:
        proc.kill()
        proc.wait()
        for g in (stale, mine):
            g.kill()
            g.remove()


@needs_cgroups
@pytest.mark.skipif("pids" not in LAYOUT.controllers, reason="no pids controller on this machine")
def test_the_group_bounds_tasks() -> None:
    group = cgroups.JobGroup(f"test-{os.getpid()}-pids", LAYOUT, pids_max=8)
    join = "".join(f"open({p!r}, 'w').write('0')\n" for p in group.procs_files())
    script = join + ("import threading, time\nstarted = 0\n"
                     "try:\n"
                     "    for _ in range(32):\n"
                     "        threading.Thread(target=time.sleep, args=(5,), daemon=True).start(); started += 1\n"
                     "except RuntimeError:\n    pass\nprint(started)\n")
    try:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
        assert int(out.stdout.strip()) < 8, out
        assert group.limits["pids_max"] == 8
    finally:
        group.kill()
        group.remove()


@needs_cgroups
def test_the_isolation_record_names_the_containment(double, options) -> None:
    from kernelrank.runner.judge.harness import evaluate

    r = evaluate(double.spec(), "def custom_kernel(data):\n    return data[0] * 2\n", "test", "cpu", options)
    assert r.status.value == "passed", r.message
    assert r.isolation["containment"] == LAYOUT.name and r.isolation["cleanup"] == "by cgroup"
    if r.isolation["method"] != "none":
        assert r.isolation["pid_namespace"] is True
