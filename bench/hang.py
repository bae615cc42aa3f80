"""Time from submitting a hanging kernel to its verdict, through the service.

Starts a real ``kernelrank serve`` (API, control worker, one warm CPU runner) on its embedded
default in a temp folder and submits, one after the other, softmax kernels that hang:

1. on their first call (``while True: pass``), in test mode: stopped at the first call's deadline
   (``budgets.first_call``, 10 s; a call found compiling gets up to ``budgets.compile_call``);
2. on their third call, in test mode: stopped at a later call's deadline
   (``max(call_floor, call_factor x the reference's time)``, 10 s);
3. on their third call, in leaderboard mode (the mode whose budget was 600 s before per-call
   deadlines);

and then a correct kernel, to show the runner serves the next job at once. Prints, for each, the
seconds from the POST to the final status, the status and the start of its message. Asserts nothing.

Usage: ``python bench/hang.py``
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.service import API, ROOT, embedded_service, machine  # noqa: E402
from kernelrank.vocab import FINAL_STATUSES  # noqa: E402

FIRST_CALL = """
def custom_kernel(data):
    while True:
        pass
"""
THIRD_CALL = """
import torch
calls = [0]

def custom_kernel(data):
    calls[0] += 1
    while calls[0] >= 3:
        pass
    (x,) = data
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
"""
CORRECT = (ROOT / "reference_kernels" / "softmax" / "examples" / "correct_pytorch.py").read_text()


def _post_to_verdict(client: httpx.Client, code: str, mode: str) -> tuple[float, str, str]:
    t0 = time.perf_counter()
    r = client.post(f"{API}/submissions", json={"problem": "softmax", "device": "cpu", "mode": mode, "code": code})
    r.raise_for_status()
    sid = int(r.json()["id"])
    while True:
        body = client.get(f"{API}/submissions/{sid}").json()
        if body["status"] in FINAL_STATUSES:
            return time.perf_counter() - t0, body["status"], str(body.get("message", ""))
        time.sleep(0.1)


def main() -> None:
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="kernelrank-hang-") as tmp:
        with embedded_service(Path(tmp), rate_submissions_per_hour="0", rate_concurrent_jobs="0") as svc:
            with httpx.Client(base_url=svc.url, headers={"Authorization": f"Bearer {svc.admin_token}"},
                              timeout=30) as client:
                _post_to_verdict(client, CORRECT, "test")  # the zygote's start and caches
                for label, code, mode in (("hangs on its first call", FIRST_CALL, "test"),
                                          ("hangs on its third call", THIRD_CALL, "test"),
                                          ("hangs on its third call", THIRD_CALL, "leaderboard"),
                                          ("correct kernel right after", CORRECT, "test")):
                    seconds, status, message = _post_to_verdict(client, code, mode)
                    print(f"{label:28} {mode:11} {seconds:6.1f} s  {status:8} {message[:110]}")
    print(f"machine after: {machine()}")


if __name__ == "__main__":
    main()
