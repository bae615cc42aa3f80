"""The judge's side of isolation: a method chosen once per judge process by a probe (the real set-up
run in a throw-away child and checked from inside), and what was in force measured from outside
the child (``/proc``: its namespaces, uid, capabilities, mounts), never taken from its report.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from kernelrank.runner.containment import rlimits
from kernelrank.runner.containment.isolation import METHODS, PRIVATE_DIRS, Plan, child_command, make_plan, status_fields
from kernelrank.vocab import AUTO


@functools.lru_cache(maxsize=None)
def probe(method: str) -> tuple[bool, str]:
    """Run the real set-up for ``method`` in a throw-away process; ``(works, reason)``. Cached per
    judge process: the answer depends on the kernel, privileges and mounts, not on the job."""
    if method == "none":
        return True, "no isolation requested"
    if method == "setuid" and os.geteuid() != 0:
        return False, "the setuid method needs a judge running as root"
    if not sys.platform.startswith("linux"):
        return False, "namespaces need Linux"
    work = Path(tempfile.mkdtemp(prefix="kr-probe-"))
    try:
        (work / "build").mkdir()  # bound at BUILD_VIEW, as a job's is
        plan = make_plan(method, work, {"core_bytes": 0})
        if plan.uid is not None:
            for path in (work, work / "build"):
                os.chown(path, plan.uid, plan.uid)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            proc = subprocess.run(child_command(plan, "--probe"), cwd=work, env=env, capture_output=True, timeout=120,
                                  start_new_session=True, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, f"probe failed: {e}"
        if proc.returncode != 0:
            lines = proc.stderr.decode(errors="replace").strip().splitlines()
            return False, (lines[-1] if lines else f"probe exited with code {proc.returncode}")[:500]
        try:
            report = json.loads(proc.stdout.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            return False, "probe gave no report"
        if not report.get("pid_one") or report.get("processes_seen", 99) > 1:
            return False, "the probe was not alone in a PID namespace of its own"
        if not report.get("network_blocked"):
            return False, "the network was still reachable in the probe"
        if not report.get("outside_read_only"):
            return False, "the probe could write outside its folder"
        if not report.get("python_readable"):
            return False, f"Python or torch unreadable in the sandbox: {report.get('python_error')}"
        if plan.build_view and not report.get("build_view"):
            return False, f"the build folder was not bound at {plan.build_view} in the probe"
        if report.get("gpu_devices_blocked"):
            return False, f"GPU devices not usable in the sandbox: {report['gpu_devices_blocked'][:5]}"
        return True, "ok"
    finally:
        shutil.rmtree(work, ignore_errors=True)


def choose(requested: str = AUTO) -> tuple[str, str]:
    """The isolation method to use and why: ``requested`` if it works, or for ``"auto"`` the first
    that works of ``setuid`` (root only) and ``userns``, else ``none``.

    Raises:
        ValueError: an unknown method.
    """
    if requested not in (AUTO, *METHODS):
        raise ValueError(f"unknown isolation {requested!r}; use auto, setuid, userns or none")
    candidates = ["setuid", "userns"] if requested == AUTO else [requested]
    reasons = []
    for method in candidates:
        ok, why = probe(method)
        if ok:
            return method, "ok"
        reasons.append(f"{method}: {why}")
    return "none", "; ".join(reasons)


def measure(pid: int, plan: Plan) -> dict[str, Any]:
    """What isolation is in force for the live child ``pid``, read from ``/proc`` by the judge (not
    reported by the child): network namespace, read-only root with a writable folder, uid,
    capabilities, user namespace, limits."""
    def link(name: str, p: int | str) -> str | None:
        try:
            return os.readlink(f"/proc/{p}/ns/{name}")
        except OSError:
            return None

    net = link("net", pid)
    network = "netns" if net is not None and net != link("net", "self") else "none"
    found_mounts = mounts(pid)
    root_ro = "ro" in found_mounts.get("/", "").split(",")
    work_rw = "rw" in found_mounts.get(plan.workdir, "").split(",")
    filesystem = "read-only" if root_ro and work_rw else "private-cwd"
    uid, cap_eff = status_fields(pid)
    found = rlimits.read(pid)
    record = rlimits.as_record(found)
    record["processes_enforced"] = uid not in (None, 0) and found.get("processes") is not None
    return {
        "method": plan.method,
        "network": network,
        "pid_namespace": link("pid", pid) not in (None, link("pid", "self")),
        "filesystem": filesystem,
        "user": "sandbox-uid" if uid is not None and uid != os.getuid() else "same-uid",
        "uid": uid,
        "user_namespace": link("user", pid) not in (None, link("user", "self")),
        "capabilities": cap_eff,
        "hidden": list(plan.hide),
        "gpu_devices_hidden": list(plan.gpu_hide),
        "private_tmp": [d for d in PRIVATE_DIRS if os.path.isdir(d)] if filesystem == "read-only" else [],
        "limits": record,
    }


def mounts(pid: int) -> dict[str, str]:
    """Mount point -> per-mount options of the topmost mount there, from ``/proc/<pid>/mountinfo``."""
    try:
        with open(f"/proc/{pid}/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in lines:
        parts = line.split()
        if len(parts) > 5:
            out[_unescape(parts[4])] = parts[5]
    return out


def _unescape(s: str) -> str:
    """Undo mountinfo's octal escapes (``\\040`` for a space)."""
    if "\\" not in s:
        return s
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and s[i + 1:i + 4].isdigit() and len(s[i + 1:i + 4]) == 3:
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)
