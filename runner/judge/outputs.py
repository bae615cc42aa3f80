"""The checks of a timed request's outputs (the judge's side): read piece by piece where each child left
them, while both are frozen; a mixin of :class:`~kernelrank.runner.judge.harness._Evaluation`.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

from kernelrank.runner.judge.answers import ReferenceFailed, read_output, read_tree, set_figures
from kernelrank.runner.judge.checking import close_in_pieces, close_to_reader, piece_bounds
from kernelrank.runner.judge.pairs import InputSet, PairedCase, Side
from kernelrank.runner.containment.sandbox import SubmissionProcess
from kernelrank.runner.judge.slots import SlotError


class OutputChecks:
    """Checks of timed outputs (a mixin of :class:`~kernelrank.runner.judge.harness._Evaluation`)."""

    def _check_request(self, paired: PairedCase, sets: list[InputSet], replies: dict[str, list[dict[str, Any]]],
                       number: int, order: tuple[Side, Side]) -> None:
        """Check the submission's outputs of one request of each side on ``sets`` (timed calls
        ``number + 1`` on), both children frozen, in the judge's own thread, each output as it is
        read (:meth:`_quick_check`); an output that fails the quick rule is read
        whole and given the full check, its verdict and figures. The first wrong output fails the
        case, naming its call.

        The reference's outputs are read alike, piece by piece, and dropped (its output on the
        first set of the case was checked in its warm-up): reading a side's outputs leaves their
        pages in the caches its next outputs are written to, and reading only the submission's
        favoured it (+10% on a case of a kernel identical to the reference: docs/research/bench-history.md).
        The sides' outputs are read in ``order``, the order their requests ran, which
        alternates (:func:`submission_first`): neither side's always read last.

        Sets derived from the case's pool have no expected output of the judge's: each output of
        the submission is checked against the reference's on the same set (:meth:`_check_derived`).
        """
        if sets[0].expected is None:  # a case's timed sets are all derived, or all drawn
            self._check_derived(paired, sets, replies, number, order)
            return
        r = paired.result
        # in this thread: in the judge's two threads a 16 MiB output's compare took 13 ms instead
        # of 4.3 and its read 4.1 ms instead of 2.2 (many short torch calls and reads, each taking
        # and giving back the GIL), and a softmax set's checking 13.1 ms instead of 10.5
        for side in order:
            for j, (reply, s) in enumerate(zip(replies[side.name], sets)):
                if side is paired.ref:
                    if not self._read_through(side.child, reply, j):
                        raise ReferenceFailed(f"the reference's output of timed call {number + j + 1} could not "
                                               f"be read in {self._where}")
                    continue
                r.checked += 1
                ok, message, figures = self._output_check(side.child, reply, j, s)
                if ok:
                    continue
                r.passed, r.message = False, f"output of timed call {number + j + 1} is wrong: {message}"
                set_figures(r, figures)
                return

    def _check_derived(self, paired: PairedCase, sets: list[InputSet], replies: dict[str, list[dict[str, Any]]],
                       number: int, order: tuple[Side, Side]) -> None:
        """:meth:`_check_request` for sets derived from the case's pool: each output of the
        submission is compared, piece by piece, with the reference process's output on the same
        set, both read where their children left them (each piece read in ``order``), by the
        quick rule (:func:`~kernelrank.runner.judge.checking.close_to_reader`). The judge does not
        compute those sets' expected outputs: the reference process ran the reference's own code
        on its own copy of the set, isolated from the submission's processes
        (:mod:`~kernelrank.runner.containment.isolation`: another sandbox user, its own PID namespace and
        slots) and frozen while they ran, and its output on the case's first set was checked
        against the judge's own in its warm-up (:meth:`_warm_up`).

        Where the two disagree by that rule, the judge computes the expected output itself
        (:meth:`_expected`) and that decides: a submission's output that fails against it fails
        the case, naming its call; one that passes while the reference process's fails is the
        judge's failure (:class:`ReferenceFailed`), never a verdict on the submission. So no
        output fails on the reference process's word alone, and the only way it could make a
        wrong output pass is to agree with it, which the submission cannot make it do.
        GEMM's cases spent 84-85% of their preparing on the judge's own reference call per set
        (docs/research/bench-history.md).

        Raises:
            ReferenceFailed: the reference's output is unreadable, not of the first set's dtype
                and shape, or wrong where the submission's is right.
        """
        r = paired.result
        first = paired.first
        assert first is not None and first.expected is not None  # the first set is drawn
        template = first.expected
        ref_first = order[0] is paired.ref
        sub_child, ref_child = paired.sub.child, paired.ref.child

        def quick(j: int) -> bool | str:
            """Set ``j``'s quick rule; a string: why the reference's output is not usable."""
            call, ref_reply = number + j + 1, replies["reference"][j]
            if not self._quick_applies(template):  # judged in full, against the judge's own expected output
                return False
            try:
                dtype, shape, read_ref = ref_child.arena.output_reader(ref_reply.get("out"), ref_child.memory, j,
                                                                       scratch=1)
            except SlotError as e:
                return f"the reference's output of timed call {call} could not be read in {self._where}: {e}"
            if ref_reply.get("alias") or dtype != template.dtype or shape != list(template.shape):
                return (f"the reference's output of timed call {call} in {self._where} is not "
                        f"of its first output's dtype and shape ({str(template.dtype).removeprefix('torch.')}, "
                        f"{list(template.shape)})")
            return self._quick_check(sub_child, replies["submission"][j], j, template, read_ref, ref_first)

        # the sets in the judge's threads, one per CPU (both children are frozen): the reads
        # (process_vm_readv) and the native rule release the GIL, so two sets are read and
        # compared at once (docs/research/bench-history.md); their answers are taken in call order
        for j, (s, passed) in enumerate(zip(sets, self._in_threads(quick, list(range(len(sets)))))):
            if isinstance(passed, str):
                raise ReferenceFailed(passed)
            call = number + j + 1
            r.checked += 1
            if passed:
                continue
            sub_reply, ref_reply = replies["submission"][j], replies["reference"][j]
            s.expected = expected = self._expected(s.data)
            ok, message, figures = self._check(sub_reply, read_output(sub_child, sub_reply, j), expected, s.data)
            if not ok:
                r.passed, r.message = False, f"output of timed call {call} is wrong: {message}"
                set_figures(r, figures)
                return
            with self._reference_failures(paired.ref, math.inf):
                theirs = read_output(ref_child, ref_reply, j)
            ok, message, _ = self._check(ref_reply, theirs, expected, s.data)
            if not ok:
                raise ReferenceFailed(f"the reference's process gave a wrong output on timed call {call} in "
                                       f"{self._where}, where the submission's was right: {message}")

    def _output_check(self, child: SubmissionProcess, reply: dict[str, Any], index: int,
                      s: InputSet) -> tuple[bool, str, dict[str, Any]]:
        """The output of call ``index`` of a request on set ``s`` (a timed one, or a warm-up's
        first), as ``(passed, message, error figures)``: passed by the quick rule
        (:meth:`_quick_check`, read piece by piece, never whole), else read whole and judged by
        the problem's full rule (:meth:`_check`), which gives the verdict, message and figures.
        Same verdicts as the full rule alone: the quick rule passes only what it would (for a
        warm-up, the full check of a 16 MiB softmax output took ~50 ms of its 100-200 ms, 32
        warm-ups a run: bench/README.md).

        Raises:
            RunEnded: ``failed``, an output in a mapping of the input slots (:func:`read_output`).
            ProtocolViolation: an output description that does not fit its slot.
        """
        if s.expected is not None and self._quick_check(child, reply, index, s.expected):
            return True, "ok", {}
        return self._check(reply, read_output(child, reply, index), s.expected, s.data)

    @staticmethod
    def _read_through(child: SubmissionProcess, reply: dict[str, Any], index: int) -> bool:
        """Read an output piece by piece as :meth:`_quick_check` would, and drop it; ``False`` when
        it could not be read."""
        desc = reply.get("out")
        if not isinstance(desc, dict):
            return False
        try:
            if "tree" in desc:  # a tuple, list or dict of tensors: read whole, each
                read_tree(child.arena, desc, child.memory, index)
                return True
            _dtype, shape, read = child.arena.output_reader(desc, child.memory, index)
            for start, stop in piece_bounds(math.prod(shape)):
                read(start, stop)
        except SlotError:
            return False
        return True

    def _quick_applies(self, expected: Any) -> bool:
        """Whether an output may be passed by the quick rule against ``expected``: a single tensor
        judged elementwise (not by the problem's own ``check_implementation``)."""
        return self.definition.check != "source" and isinstance(expected, torch.Tensor)

    def _quick_check(self, child: SubmissionProcess, reply: dict[str, Any], index: int, expected: torch.Tensor,
                     read_ref: Callable[[int, int], torch.Tensor] | None = None, ref_first: bool = False) -> bool:
        """Whether an output passes by the quick rule, read piece by piece from where the child
        left it (:meth:`~kernelrank.runner.judge.slots.Arena.output_reader`,
        :func:`~kernelrank.runner.judge.checking.close_in_pieces`): never copied whole, never held.
        ``False`` for anything the full check must look at (not a plain tensor, another dtype,
        shape or device, an aliased output, a value outside the quick rule, a malformed
        description). Given ``read_ref`` (the reference process's output on the same set, read
        alike, :meth:`_check_derived`), the values are compared with it, ``expected`` giving only
        the dtype, shape and device (:func:`~kernelrank.runner.judge.checking.close_to_reader`, each
        piece of the reference's read first where ``ref_first``)."""
        desc = reply.get("out")
        if (reply.get("alias") or not isinstance(desc, dict) or "tree" in desc or reply.get("out_device") is None
                or not self._quick_applies(expected)):
            return False
        try:
            dtype, shape, read = child.arena.output_reader(desc, child.memory, index)
            if (dtype != expected.dtype or shape != list(expected.shape)
                    or torch.device(str(reply["out_device"])).type != expected.device.type):
                return False
            tol = self.definition.tolerance_for(str(expected.dtype).removeprefix("torch."))
            if read_ref is not None:
                return close_to_reader(read, read_ref, expected.numel(), dtype, expected.device.type, tol.atol,
                                       tol.rtol, ref_first=ref_first)
            return close_in_pieces(read, expected, tol.atol, tol.rtol)
        except (SlotError, RuntimeError):
            return False  # the full check says why (a malformed description is a protocol violation)
