"""The words every layer shares, defined once: submission statuses, verdicts, modes, run kinds
and device queues. The API's schemas, the pages, the CLI, the metrics, the limits and the
runner's results import them from here instead of spelling them (they had drifted: filtering
"My submissions" by ``cancelled`` was refused). The values are the ones stored in the database.

This module imports nothing but the standard library (no torch, no web or database code): the
child process that runs submitted code may import it too.

Device vocabulary:

- a **device class** is what the harness judges on: ``cpu`` or ``cuda``;
- a **device queue** is where a submission's job goes and what a leaderboard is for: ``cpu``, or
  ``cuda-<model>`` per GPU model and form factor (``cuda-h100-sxm``, ``cuda-h100-pcie``; a MIG
  slice ``cuda-h100-sxm-mig-1g10gb``; :func:`gpu_queue_name`);
- ``cuda`` alone is the local-evaluation shorthand for "this machine's GPU"
  (``kernelrank eval --device cuda``, ``kernelrank runner --device cuda``); the service's queues
  always name the model.
"""

from __future__ import annotations

import re
from enum import StrEnum


class Verdict(StrEnum):
    """The verdict of an evaluation (a run), and of a finished submission.

    - ``passed``: every checked output matched the reference (and, when timed, timing succeeded);
    - ``failed``: an output was wrong (values, shape, dtype, device or type);
    - ``error``: the submission raised, exited or crashed (runtime error), or the problem or the
      judge was broken;
    - ``timeout``: it ran past its time budget and was killed;
    - ``out_of_memory``: it held more device memory than the problem's budget
      (``device_memory_mib``) or its allocator ran out of device memory (the message names the
      case and says "out of device memory");
    - ``compile_error``: it failed to load or build (Python syntax, C++/CUDA or Triton compile);
    - ``rejected``: it broke the protocol or the trust rules (e.g. timing claims the judge's wall
      clock cannot support, malformed answers, threads or processes left running after a call,
      functions of the harness or torch replaced), or it was not run because the isolation the
      evaluation requires is not available.

    An output that shares memory with an input or with the previous call's output ``failed``.
    """

    passed = "passed"
    failed = "failed"
    error = "error"
    timeout = "timeout"
    out_of_memory = "out_of_memory"
    compile_error = "compile_error"
    rejected = "rejected"


class SubmissionStatus(StrEnum):
    """A submission's status: ``queued`` -> ``running`` -> a :class:`Verdict`; or ``cancelled``
    (by its owner or an admin while queued)."""

    queued = "queued"
    running = "running"
    passed = "passed"
    failed = "failed"
    error = "error"
    timeout = "timeout"
    out_of_memory = "out_of_memory"
    compile_error = "compile_error"
    rejected = "rejected"
    cancelled = "cancelled"


#: Every verdict, in :class:`Verdict`'s order.
VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict)
#: Every submission status, in :class:`SubmissionStatus`'s order.
STATUSES: tuple[str, ...] = tuple(s.value for s in SubmissionStatus)
#: Statuses after which nothing changes a submission: the verdicts and a user's cancel.
FINAL_STATUSES: frozenset[str] = frozenset(VERDICTS) | {SubmissionStatus.cancelled.value}
#: Statuses of a submission whose job is still to be done (it holds a concurrency slot).
ACTIVE_STATUSES: tuple[str, ...] = (SubmissionStatus.queued.value, SubmissionStatus.running.value)


class Mode(StrEnum):
    """What an evaluation does: ``test`` (correctness only), ``benchmark`` (and timing),
    ``leaderboard`` (timed on fresh inputs, public and secret runs, ranked) or ``profile``."""

    test = "test"
    benchmark = "benchmark"
    leaderboard = "leaderboard"
    profile = "profile"


#: Every mode, in :class:`Mode`'s order.
MODES: tuple[str, ...] = tuple(m.value for m in Mode)
#: Modes that time the submission against the reference.
TIMED_MODES: tuple[str, ...] = (Mode.benchmark.value, Mode.leaderboard.value)


def parse_mode(value: str) -> Mode:
    """The :class:`Mode` named ``value``: the one check of a mode every entry point makes (the
    API, ``kernelrank submit``, ``kernelrank eval``, the harness).

    Raises:
        ValueError: not a mode; the message names the modes.
    """
    try:
        return Mode(value)
    except ValueError:
        raise ValueError(f"unknown mode {value!r}; one of {', '.join(MODES)}") from None


class CaseKind(StrEnum):
    """A problem's case: ``test`` (checked for correctness) or ``benchmark`` (checked and timed)."""

    test = "test"
    benchmark = "benchmark"


class RunKind(StrEnum):
    """One evaluation of a submission: ``public`` (every mode, the problem's seeds) and
    ``secret`` (leaderboard mode, seeds the author never sees)."""

    public = "public"
    secret = "secret"


#: Every run kind.
RUN_KINDS: tuple[str, ...] = tuple(k.value for k in RunKind)


def run_kinds(mode: str) -> tuple[str, ...]:
    """The runs a submission in ``mode`` gets: public and secret in leaderboard mode, else public."""
    return RUN_KINDS if mode == Mode.leaderboard else (RunKind.public.value,)


class DeviceClass(StrEnum):
    """What the harness judges on: the CPU or a CUDA GPU."""

    cpu = "cpu"
    cuda = "cuda"


#: Every device class.
DEVICE_CLASSES: tuple[str, ...] = tuple(d.value for d in DeviceClass)
#: The CPU's device queue.
CPU_QUEUE = "cpu"
#: Prefix of a GPU model's device queue (``cuda-h100``).
CUDA_QUEUE_PREFIX = "cuda-"
#: The local-evaluation shorthand for this machine's GPU (never a service queue).
LOCAL_CUDA = "cuda"
#: ``auto``: let the machine choose. ``--device auto``: the GPU when one is visible, else the CPU
#: (local commands only); ``runner_isolation`` ``auto``: the strongest isolation method available.
AUTO = "auto"
_QUEUE_NAME = re.compile(r"^(cpu|cuda-[a-z0-9-]{1,48})$")


def is_device_queue(name: str) -> bool:
    """Whether ``name`` is a device queue: ``cpu`` or ``cuda-<model>`` (lower-case letters,
    digits and dashes, at most 48)."""
    return bool(_QUEUE_NAME.match(name))


def device_class(queue: str) -> str:
    """The device class of a device queue: ``cpu`` -> ``cpu``, ``cuda-*`` -> ``cuda``.

    Raises:
        ValueError: not a device queue name.
    """
    if not is_device_queue(queue):
        raise ValueError(f"{queue!r} is not a device queue (cpu or cuda-<model>, e.g. cuda-h100)")
    return DeviceClass.cpu.value if queue == CPU_QUEUE else DeviceClass.cuda.value


#: GPU models sold in more than one form factor, whose speed differs by it (an H100 PCIe has
#: 2.0 TB/s and 756 dense bf16 TFLOP/s, an H100 SXM 3.35 TB/s and 989): their queues name it.
FORM_FACTOR_MODELS = frozenset({"a100", "a800", "h100", "h800", "h200"})
#: Form factor words in GPU names (as NVML and torch report them) -> queue suffix. "HBM3"/"HBM3e"
#: without another word is the SXM part ("NVIDIA H100 80GB HBM3"); "NVIDIA H200" alone is SXM too.
_FORM_FACTORS = ((re.compile(r"\bpcie\b"), "pcie"), (re.compile(r"\bnvl\b"), "nvl"),
                 (re.compile(r"\bsxm\d?\b"), "sxm"), (re.compile(r"\bhbm3e?\b"), "sxm"))
_MIG = re.compile(r"\bmig\s+(\d+g\.\d+gb)\b")


def gpu_queue_name(gpu_name: str) -> str:
    """Queue of a GPU model (one queue per SKU, one per MIG slice profile).

    ``"NVIDIA H100 80GB HBM3"`` -> ``"cuda-h100-sxm"``; ``"NVIDIA H100 PCIe"`` ->
    ``"cuda-h100-pcie"``; ``"NVIDIA H100 NVL"`` -> ``"cuda-h100-nvl"``; ``"NVIDIA A100-SXM4-80GB"``
    -> ``"cuda-a100-sxm"``; ``"NVIDIA H200"`` -> ``"cuda-h200-sxm"``; a MIG slice as NVML names it,
    ``"NVIDIA H100 80GB HBM3 MIG 1g.10gb"`` -> ``"cuda-h100-sxm-mig-1g10gb"``; other models by
    model only (``"NVIDIA GeForce RTX 4090"`` -> ``"cuda-rtx4090"``); unknown models get a slug.
    A form-factor model whose name says no form factor keeps the bare model (``cuda-h100``).
    """
    lowered = gpu_name.lower().replace("-", " ").replace("_", " ")
    mig = _MIG.search(lowered)
    base = lowered[:mig.start()] if mig else lowered
    m = re.search(r"\b([abhlt]\d{1,3}|b\d{3}|gh\d{3}|rtx ?\d{4}|mi\d{3}x?|v100|p100)\b", base)
    slug = m.group(1).replace(" ", "") if m else re.sub(r"[^a-z0-9]+", "-", base.removeprefix("nvidia ")).strip("-")
    if m and slug in FORM_FACTOR_MODELS:
        form = next((f for pattern, f in _FORM_FACTORS if pattern.search(base)), None)
        if form is None and slug == "h200":
            form = "sxm"
        if form:
            slug = f"{slug}-{form}"
    if mig:
        slug = f"{slug}-mig-{mig.group(1).replace('.', '')}"
    return f"{CUDA_QUEUE_PREFIX}{slug[:48]}"
