"""One timed request of one side (the judge's side): its sets placed while every process is frozen, its
window on the judge's clock, its claims, its process's page faults and CPU time, the other side's
CPU time meanwhile; a reference's failure is the judge's. A mixin of
:class:`~kernelrank.runner.judge.harness._Evaluation`.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator

import torch

from kernelrank import vocab
from kernelrank.runner.judge import disturbed
from kernelrank.runner.judge.answers import ReferenceFailed, RunEnded, ns_list
from kernelrank.runner.judge.busy import JudgeBusy
from kernelrank.runner.judge.pairs import Call, InputSet, Side
from kernelrank.runner.containment.sandbox import ChildDied, ChildTimeout, ChildUnfrozen, ProtocolViolation


class Requests:
    """Timed requests (a mixin of :class:`~kernelrank.runner.judge.harness._Evaluation`)."""

    #: the GPU's clock around each timed request (:mod:`~kernelrank.runner.judge.disturbed`);
    #: ``None``: not watched (the CPU, no NVML)
    _clocks: disturbed.ClockWatch | None = None

    def _side_go(self, side: Side, layout: dict[str, Any], deadline: float, ref_s: float,
                 read: bool = True, calls: int = 1) -> tuple[dict[str, Any], torch.Tensor | None]:
        """:meth:`_go` for either side (``calls``: the input sets of a layout of several, for the
        request's deadline); a failure of the reference's child is the judge's
        (:class:`ReferenceFailed`), never a verdict on the submission."""
        with self._reference_failures(side, deadline):
            return self._go(side.child, layout, deadline, ref_s, repeat=calls, read=read)

    @contextlib.contextmanager
    def _reference_failures(self, side: Side, deadline: float) -> Iterator[None]:
        """Around a request of ``side``'s process: a failure of the reference's child is the
        judge's (:class:`ReferenceFailed`), never a verdict on the submission; the submission's
        failures pass as they are.

        Raises:
            ChildTimeout: as raised, from the submission, or from the reference once the run's
                ``deadline`` has passed (the submission's calls, slow or many, spent the budget:
                the run's timeout, not the judge's failure).
            JudgeBusy: the reference's child did not answer within its call's deadline, or did not
                stop after it (the machine too busy to time it now: :mod:`~kernelrank.runner.judge.busy`).
            ReferenceFailed: any other failure of the reference's child.
        """
        if side.name == "submission":
            yield
            return
        try:
            yield
        except ChildTimeout:
            if time.monotonic() >= deadline:
                raise
            raise JudgeBusy(f"the reference's process did not answer in {self._where}: "
                            "the machine is too busy to time it now") from None
        except ChildUnfrozen as e:  # its processes did not stop in time after a call
            raise JudgeBusy(f"the reference's processes did not stop after a call in {self._where}: "
                            "the machine is too busy to time it now") from e
        except RunEnded as e:
            if e.status == vocab.Verdict.timeout:  # its call's own deadline passed (``_go``)
                raise JudgeBusy(f"the reference's process did not answer within its call's deadline in "
                                f"{self._where}: the machine is too busy to time it now") from e
            raise ReferenceFailed(f"the reference failed in {self._where}: {e}") from e
        except (ChildDied, ProtocolViolation) as e:
            raise ReferenceFailed(f"the reference failed in {self._where}: {e}") from e

    def _timed_request(self, side: Side, other: Side, sets: list[InputSet],
                       deadline: float) -> tuple[Call, list[dict[str, Any]]]:
        """One timed request of one side's current process, one call on its copy of each of ``sets``
        (one set: the plain layout; several: :meth:`~kernelrank.runner.judge.slots.Arena.place_sets`),
        every other process frozen throughout (the other side's CPU time in the window is counted);
        the request's figures (its process's page faults among them, which decide when the process
        is warm: :meth:`Side.settle`), and per call the answer about its output (the outputs stay
        where the child left them until :meth:`_check_request` reads them)."""
        child = side.child
        if len(sets) == 1:
            layout = self._place(child, sets[0].data, sets[0].room)
        else:
            layout = child.arena.place_sets([s.data for s in sets], sets[0].room, direct=child.memory is not None,
                                            copy=self._copy, dests=self._dests(sets[0].data))
        main_before = child.main_cpu_ns()
        job_before = child.cpu_ns()
        other_before = other.cpu_ns()
        faults_before = child.faults()
        clock = self._clocks.before() if self._clocks is not None else None
        reply, _ = self._side_go(side, layout, deadline, max(s.ref_s for s in sets), read=False, calls=len(sets))
        window = child.span_ns
        faults_after = child.faults()
        other_after = other.cpu_ns()
        job_after = child.cpu_ns()
        main_cpu = child.main_cpu_ns() - main_before
        # read once the window's figures are, as it may pause (every process frozen) after a throttled request
        throttled = clock is not None and self._clocks is not None and self._clocks.after(clock)
        job_cpu = None if job_before is None or job_after is None else job_after - job_before
        claims = ns_list(reply.get("times_ns"), len(sets))
        if sum(claims) > window:
            message = (f"{self._where}: the {side.name}'s process claimed {sum(claims)} ns for "
                       f"{'a call' if len(sets) == 1 else f'{len(sets)} calls'} answered after {window} ns")
            if side.name == "submission":
                raise RunEnded(vocab.Verdict.rejected, message)
            raise ReferenceFailed(message)
        if side.other_cpu_ns is not None and other_before is not None and other_after is not None:
            side.other_cpu_ns += other_after - other_before
        else:
            side.other_cpu_ns = None
        if len(sets) == 1:
            replies = [reply]
        else:
            replies = reply.get("outs")
            if not isinstance(replies, list) or len(replies) != len(sets) or not all(isinstance(x, dict) for x in replies):
                raise (ProtocolViolation if side.name == "submission" else ReferenceFailed)(
                    f"{self._where}: the {side.name}'s answer does not describe one output per input set")
        faults = None if faults_before is None or faults_after is None else faults_after - faults_before
        flushes = ns_list(reply["flush_ns"], len(sets)) if "flush_ns" in reply else None
        bound = reply.get("flush_bound_ns")
        overlapped = disturbed.flush_overlapped(flushes, bound if isinstance(bound, (int, float)) else None)
        why = disturbed.THROTTLED if throttled else disturbed.FLUSH_OVERLAP if overlapped else None
        return Call(sum(claims), window, main_cpu, claims, faults, job_cpu, why), replies
