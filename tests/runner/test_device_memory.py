"""Device memory per child (issue 45, point 2) and profile mode's sets through the slots (point 8).

Every child holds at most the problem's ``device_memory_mib`` of device memory, measured by the
judge from outside after each request (:mod:`kernelrank.runner.judge.devmem`); more is the verdict
``out_of_memory`` naming the case, for the submission, and the judge's error for the reference.
The device is simulated: :class:`tests.runner.simgpu.SimDeviceMemory` for the judge's bookkeeping,
and for whole runs on the CPU a meter that reads what a child's submission says it holds in its
folder (:class:`FolderMeter`), as NVML would count it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from kernelrank.problems import DEFAULT_DEVICE_MEMORY_MIB, ProblemDefinition, ProblemSpec
from kernelrank.runner.containment.sandbox import SubmissionProcess
from kernelrank.runner.judge.answers import ReferenceFailed, RunEnded, raise_on_device_memory
from kernelrank.runner.judge.devmem import MIB, DeviceMemoryWatch
from kernelrank.runner.judge.harness import EvalOptions, evaluate
from kernelrank.runner.submission.child import _error_kind
from kernelrank.vocab import Verdict
from tests.conftest import submission
from tests.runner.simgpu import SimDeviceMemory, SimOutOfMemory

GIB = 1 << 30


class _Child:
    """The judge's handle on a child as the budget sees it: a pid, what it runs, a kill."""

    def __init__(self, pid: int, runs: str = "submission"):
        self.pid, self.runs, self.killed, self.device_memory = pid, runs, False, None

    def kill(self) -> None:
        self.killed = True


def test_the_budget_is_a_field_of_the_problem_with_one_default(double) -> None:
    data = double.definition.model_dump()
    assert double.definition.device_memory_mib == DEFAULT_DEVICE_MEMORY_MIB
    assert ProblemDefinition.model_validate({**data, "device_memory_mib": 512}).device_memory_mib == 512
    with pytest.raises(ValueError, match="device_memory_mib"):
        ProblemDefinition.model_validate({**data, "device_memory_mib": 0})


def test_the_watch_reads_the_drivers_count_for_the_childs_processes() -> None:
    gpu = SimDeviceMemory()
    child = _Child(pid=41)
    watch = DeviceMemoryWatch(gpu, 2 * GIB, child)
    gpu.allocate(41, GIB)
    gpu.allocate(7, 30 * GIB)  # the judge's and the reference's memory are not the child's
    assert watch.held() == GIB and watch.over() is None
    gpu.allocate(41, 2 * GIB, through_allocator=False)  # around torch's allocator: still counted
    assert watch.over() == 3 * GIB


def test_without_per_process_figures_the_ledger_counts_only_the_childs_windows() -> None:
    gpu = SimDeviceMemory(lists_processes=False)  # NVML in a container: no pid of the job matches
    child = _Child(pid=41)
    watch = DeviceMemoryWatch(gpu, 2 * GIB, child)
    gpu.allocate(7, 10 * GIB)  # the judge places inputs while the child is frozen
    watch.opened()
    gpu.allocate(41, GIB)  # the child's window
    watch.closed()
    gpu.allocate(7, 5 * GIB)
    assert watch.held() == GIB
    watch.opened()
    gpu.allocate(41, 2 * GIB)
    gpu.free(41, GIB // 2)
    watch.closed()
    assert watch.over() == GIB + 2 * GIB - GIB // 2


def test_the_allocators_cap_refuses_what_the_budget_does_not_allow() -> None:
    gpu = SimDeviceMemory(total=80 * GIB)
    gpu.cap(41, 2 * GIB / gpu.total)  # what the child sets at hello: its budget's share of the device
    gpu.allocate(41, GIB)
    with pytest.raises(SimOutOfMemory):
        gpu.allocate(41, 2 * GIB)
    assert gpu.held[41] == GIB
    # torch.cuda.OutOfMemoryError in the child is answered as out_of_memory, a RuntimeError as an error
    assert _error_kind(torch.cuda.OutOfMemoryError("CUDA out of memory")) == "out_of_memory"
    assert _error_kind(RuntimeError("CUDA error: an illegal memory access")) == "runtime_error"


def test_the_jobs_processes_are_its_cgroups_or_else_its_sandboxs() -> None:
    from types import SimpleNamespace

    from kernelrank.runner.judge.devmem import job_pids

    grouped = SimpleNamespace(pid=10, group=SimpleNamespace(pids=lambda: {10, 11, 12}))
    loose = SimpleNamespace(pid=10, group=None, watch=SimpleNamespace(members=lambda: {13}))
    assert job_pids(grouped) == {10, 11, 12} and job_pids(loose) == {10, 13}


def test_a_child_over_its_budget_is_killed_with_a_verdict_naming_the_case() -> None:
    gpu = SimDeviceMemory()
    child = _Child(pid=41)
    child.device_memory = DeviceMemoryWatch(gpu, GIB, child)
    gpu.allocate(41, GIB)
    raise_on_device_memory(child, "benchmark case 1 (N=8 seed=4)")  # at its budget: fine
    assert not child.killed
    gpu.allocate(41, 1)
    with pytest.raises(RunEnded) as ended:
        raise_on_device_memory(child, "benchmark case 1 (N=8 seed=4)")
    assert ended.value.status is Verdict.out_of_memory and child.killed
    assert ended.value.message.startswith("out of device memory in benchmark case 1 (N=8 seed=4): ")
    assert "1024 MiB" in ended.value.message


# -- whole runs on the CPU ---------------------------------------------------------------------------
class FolderMeter:
    """The simulated driver of whole runs: a submission's processes hold the bytes it wrote to
    ``simgpu-used`` in its folder (0 without one); the reference's hold ``reference_bytes``. The
    whole device's use is not known, so the watch has only these figures."""

    def __init__(self, reference_bytes: int = 0, scratch: Path | None = None):
        self.reference_bytes = reference_bytes
        #: with a scratch folder, the device's use is every child's there, and no process is
        #: listed (NVML in a container): the judge's ledger of windows counts instead
        self.scratch = scratch

    def device_used(self) -> int | None:
        if self.scratch is None:
            return None
        return sum(int(p.read_text() or 0) for p in self.scratch.glob("*/simgpu-used"))

    def process_used(self, child: Any) -> int | None:
        if self.scratch is not None:
            return None
        if child.runs == "reference":
            return self.reference_bytes
        try:
            return int((Path(child.workdir) / "simgpu-used").read_text())
        except (OSError, ValueError):
            return 0


def _budgeted(double, mib: int) -> ProblemSpec:
    spec = double.spec()
    return ProblemSpec(spec.definition.model_copy(update={"device_memory_mib": mib}), spec.reference_source,
                       spec.revision)


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every request the judge sends a child in the test, as sent."""
    sent: list[dict[str, Any]] = []
    original = SubmissionProcess.request

    def recording(self: SubmissionProcess, message: dict[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        sent.append(message)
        return original(self, message, *args, **kwargs)

    monkeypatch.setattr(SubmissionProcess, "request", recording)
    return sent


def test_a_submission_over_its_budget_gets_out_of_memory_naming_the_case(double, options, requests) -> None:
    opts = EvalOptions(**{**options.__dict__, "device_memory": FolderMeter()})
    r = evaluate(_budgeted(double, 1024), submission("device_memory_hog.py"), "benchmark", "cpu", opts)
    assert r.status is Verdict.out_of_memory, r.message
    assert r.message.startswith("out of device memory in benchmark case 0 ("), r.message
    assert "3072 MiB" in r.message and "1024 MiB" in r.message
    assert [c.passed for c in r.cases if c.kind == "test"] == [True, True]
    hellos = [m for m in requests if m["op"] == "hello"]
    assert hellos and all(m["device_memory_bytes"] == 1024 * MIB for m in hellos)  # before the import


def test_the_ledger_of_windows_finds_the_same_child_without_per_process_figures(double, options) -> None:
    opts = EvalOptions(**{**options.__dict__, "device_memory": FolderMeter(scratch=options.scratch_dir)})
    r = evaluate(_budgeted(double, 1024), submission("device_memory_hog.py"), "benchmark", "cpu", opts)
    assert r.status is Verdict.out_of_memory, r.message
    assert r.message.startswith("out of device memory in benchmark case 0 ("), r.message
    assert "3072 MiB" in r.message


def test_the_allocators_out_of_memory_is_the_verdict_naming_the_case(double, options) -> None:
    r = evaluate(double.spec(), submission("device_oom.py"), "test", "cpu", options)
    assert r.status is Verdict.out_of_memory, r.message
    assert r.message.startswith("out of device memory in test case 0 (seed=1 N=10): OutOfMemoryError"), r.message


def test_a_reference_over_its_budget_is_the_judges_error_not_a_verdict(double, options) -> None:
    opts = EvalOptions(**{**options.__dict__, "device_memory": FolderMeter(reference_bytes=2 * GIB)})
    with pytest.raises(ReferenceFailed, match="out of device memory"):
        evaluate(_budgeted(double, 1024), submission("double_ok.py"), "benchmark", "cpu", opts)


def test_profile_mode_places_each_case_in_the_slots_and_sends_layouts(double, options, requests) -> None:
    r = evaluate(double.spec(), submission("double_ok.py"), "profile", "cpu", options)
    assert r.status is Verdict.passed, r.message
    assert "case 0" in r.profile["table"] and "case 1" in r.profile["table"]
    profiles = [m for m in requests if m["op"] == "profile"]
    assert len(profiles) == len(double.definition.benchmark_cases("cpu"))
    assert [(m["first"], m["last"]) for m in profiles] == [(True, False), (False, True)]
    for m in profiles:
        assert "sets" not in m and not _tensors(m), "a profile request carried tensor data"
        leaves = m["inputs"]["data"]["__tuple__"]  # double's input set: a tuple of one vector
        assert [sorted(leaf) for leaf in leaves] == [["__slot__", "device", "dtype", "shape"]], leaves
    sizes = [m["inputs"]["data"]["__tuple__"][0]["shape"] for m in profiles]
    assert sizes == [[c.model_extra["N"]] for c in double.definition.benchmark_cases("cpu")]


def _tensors(v: Any) -> bool:
    if isinstance(v, torch.Tensor):
        return True
    if isinstance(v, dict):
        return any(_tensors(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return any(_tensors(x) for x in v)
    return False
