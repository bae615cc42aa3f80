"""The runners page and API show each runner's self-test result and date, and its GPU facts."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import World


def _beat(name: str, device: str, info: dict) -> None:
    from kernelrank.db.session import session_scope
    from kernelrank.services import runners

    with session_scope() as s:
        runners.heartbeat(s, name, device, info, "0.1.0")


def test_self_test_result_and_date_on_the_page_and_in_the_api(client: TestClient, world: World) -> None:
    gpu = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-abcd", "compute_capability": "9.0", "driver_version": "570.86.15",
           "sm_clock_mhz": 1755, "mem_clock_mhz": 2619, "power_limit_w": 700.0, "mig_mode": "disabled"}
    _beat("runner-h100-sxm-0", "cuda-h100-sxm", {"gpu": gpu, "self_test": {
        "status": "passed", "at": "2026-11-24T19:54:24+00:00", "checks": 120, "failed": 0, "failures": [],
        "host_memory": "cgroup 34359738368 bytes", "output_reads": "process_vm_readv",
        "priority": "nice -10, autogroup -10", "fresh_memory": "0.05 ms per MiB",
        "host_moments": "speedup ±2.1% a moment, steal 0.0%"}})
    _beat("runner-h100-sxm-1", "cuda-h100-sxm", {"self_test": {
        "status": "failed", "at": "2026-11-24T20:01:00+00:00", "checks": 120, "failed": 1,
        "failures": ["toolchain CUDA load_inline, with PCH (test): compile_error"]}})
    html = client.get("/runners").text
    rows = {name: html[html.index(name):html.index("</tr>", html.index(name))]
            for name in ("runner-h100-sxm-0", "runner-h100-sxm-1", "runner-cpu-1")}
    assert "passed" in rows["runner-h100-sxm-0"] and "2026-11-24T19:54:24+00:00" in rows["runner-h100-sxm-0"]
    # what the self-test found of the host, on hover: what bounds a child's memory, how outputs are
    # read, the children's priority, what fresh memory costs, how much the host's moments move a speedup
    assert ("host memory: cgroup 34359738368 bytes; outputs read by process_vm_readv; children at nice -10, "
            "autogroup -10; fresh memory 0.05 ms per MiB; host moments: speedup ±2.1% a moment, steal 0.0%"
            ) in rows["runner-h100-sxm-0"]
    assert "failed" in rows["runner-h100-sxm-1"] and "CUDA load_inline" in rows["runner-h100-sxm-1"]
    assert "not run" in rows["runner-cpu-1"]
    body = {r["name"]: r for r in client.get("/api/v1/runners").json()["runners"]}
    assert body["runner-h100-sxm-0"]["info"]["self_test"]["status"] == "passed"
    assert body["runner-h100-sxm-0"]["info"]["gpu"]["compute_capability"] == "9.0"
    assert body["runner-h100-sxm-1"]["info"]["self_test"]["failures"]


def test_a_starting_runner_shows_its_self_tests_progress_and_a_cached_pass_says_what_it_stands_on(
        client: TestClient, world: World) -> None:
    _beat("runner-cpu-7", "cpu", {"state": "starting: self-test 12/30", "device": "cpu",
                                  "self_test": {"status": "not run"}})
    _beat("runner-cpu-8", "cpu", {"self_test": {
        "status": "passed", "scope": "probes", "at": "2026-12-02T10:05:00+00:00", "checks": 11, "failed": 0,
        "cached": {"scope": "quick", "at": "2026-12-01T09:00:00+00:00", "seconds": 104.2, "checks": 25}}})
    html = client.get("/runners").text
    starting = html[html.index("runner-cpu-7"):html.index("</tr>", html.index("runner-cpu-7"))]
    assert "starting: self-test 12/30" in starting and "not run" in starting
    cached = html[html.index("runner-cpu-8"):html.index("</tr>", html.index("runner-cpu-8"))]
    assert "passed" in cached and "probes, standing on the quick self-test of 2026-12-01T09:00:00+00:00" in cached
    body = {r["name"]: r for r in client.get("/api/v1/runners").json()["runners"]}
    assert body["runner-cpu-7"]["info"]["state"] == "starting: self-test 12/30"
    assert body["runner-cpu-8"]["info"]["self_test"]["cached"]["scope"] == "quick"


def test_a_runner_without_job_cgroups_says_so_and_names_the_fix(client: TestClient, world: World) -> None:
    problem = "the runner cannot make job cgroups: ... Fix: give its service `cgroup: private`"
    _beat("runner-gpu-9", "cuda-h100-sxm", {"self_test": {"status": "passed"},
                                            "containment": {"job_cgroups": False, "problem": problem}})
    _beat("runner-gpu-10", "cuda-h100-sxm", {"self_test": {"status": "passed"}, "containment": {"job_cgroups": True}})
    html = client.get("/runners").text
    row = html[html.index("runner-gpu-9"):html.index("</tr>", html.index("runner-gpu-9"))]
    assert "leaderboard jobs refused" in row and "`cgroup: private`" in row
    contained = html[html.index("runner-gpu-10"):html.index("</tr>", html.index("runner-gpu-10"))]
    assert "leaderboard jobs refused" not in contained
