"""The input sets of a case (the judge's side): drawn by the problem's ``generate_input`` under the
run's seeds, or derived from a pool of drawn sets, with their expected outputs; prepared in the
judge's threads a batch at a time. A mixin of :class:`~kernelrank.runner.judge.harness._Evaluation`.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, Callable

import torch

from kernelrank.problems import Case
from kernelrank.runner.judge.answers import data_nbytes, mix_seed, out_room
from kernelrank.runner.judge.output_rules import buffer_keys, poison, with_fresh_buffers
from kernelrank.runner.judge.pairs import InputSet, PairedCase
from kernelrank.vocab import DeviceClass


#: Input sets a timed case draws with the problem's ``generate_input`` (its warm-up's and the rest
#: at its opening) when its reference also defines ``derive_input``: every timed set is then made
#: from two of these by that function (:meth:`_Evaluation._derive`), at a tenth of the cost
#: (a 4M-value softmax set: ``torch.randn`` and rounding 11-13 ms of a judge's thread, a mix
#: of two pooled sets 1.2-1.7 ms; docs/research/bench-history.md).
POOL_SETS = 3


class InputSets:
    """Drawing and preparing input sets (a mixin of :class:`~kernelrank.runner.judge.harness._Evaluation`)."""

    # -- inputs and references ----------------------------------------------------------------
    def _inputs(self, case: Case, seed: int) -> tuple[Any, torch.Tensor]:
        """A fresh input set, the problem's ``generate_input`` for ``seed``, and the reference's
        output on it (:meth:`_expected`). Called in the judge's threads when a batch is prepared
        (:meth:`_prepare_batch`); the thread's :attr:`inputs_s` is the seconds the set took."""
        generating = time.perf_counter()
        data = self._draw(case, seed)
        self._local.inputs_s = time.perf_counter() - generating
        return data, self._expected(data)

    def _derive(self, pool: list[Any], seed: int) -> Any:
        """A fresh input set derived from a timed case's ``pool`` (its sets drawn by
        ``generate_input``, :data:`POOL_SETS`, :meth:`_draw_pool`): the reference's
        ``derive_input(first, second, seed=seed)`` of two of them chosen by ``seed``, a set with
        ``generate_input``'s distribution and shapes and values no call saw before, made at a
        fraction of the cost (the problem's docstring says how; ``kernelrank.problems``); the
        thread's :attr:`inputs_s` is the seconds it took."""
        generating = time.perf_counter()
        first, second = random.Random(seed).sample(range(len(pool)), 2)
        data = self.reference.derive_input(pool[first], pool[second], seed=seed)
        poison(data, self._dests(data))
        self._local.inputs_s = time.perf_counter() - generating
        return data

    def _expected(self, data: Any) -> torch.Tensor:
        """The reference's output on ``data``, computed by the judge (the trusted expected output);
        :attr:`ref_s` is the seconds it took (the judge's clock: the base of the calls' deadlines)."""
        started = time.perf_counter()
        with torch.no_grad():  # into clones of the output buffers: the set the children get keeps its 0xFF bytes
            ref = self.reference.ref_kernel(with_fresh_buffers(data, self._dests(data)))
        if self.device == DeviceClass.cuda:  # pragma: no cover - GPU-only
            torch.cuda.synchronize()
        self._local.ref_s = time.perf_counter() - started
        return ref

    def _seed(self, case: Case, number: int) -> int:
        """The seed of the case's input set ``number`` (0: its warm-up's), from the run's secret
        (:func:`mix_seed`)."""
        return mix_seed(self.secret, case.seed, number)

    def _prepare(self, case: Case, seed: int, paired: PairedCase | None = None) -> InputSet:
        """A fresh input set: drawn, with its expected output (:meth:`_inputs`); or, where the
        ``paired`` case has a pool (:meth:`_draw_pool`), derived from it (:meth:`_derive`), its
        expected output the reference process's (:meth:`_check_derived`), its deadline base and
        sizes the case's first set's (a derived set has its shapes and dtypes)."""
        if paired is not None and paired.pool:
            first = paired.first
            assert first is not None  # the pool is drawn once the case's first set is
            data = self._derive(paired.pool, seed)
            return InputSet(data, None, first.ref_s, first.nbytes, first.room, self.inputs_s)
        data, expected = self._inputs(case, seed)
        return InputSet(data, expected, self.ref_s, data_nbytes(data) + 2 * data_nbytes(expected), out_room(expected),
                    self.inputs_s, self.ref_s)

    def _draw_pool(self, case: Case, first: InputSet) -> list[Any]:
        """The input sets a timed case's sets are derived from when its reference defines
        ``derive_input`` (empty otherwise): the case's first set (its warm-up's) and
        :data:`POOL_SETS` - 1 more drawn by ``generate_input`` from seeds of the run's secret
        (numbers -1, -2...: never a timed set's), in the judge's threads."""
        if not callable(getattr(self.reference, "derive_input", None)):
            return []
        seeds = [self._seed(case, -n) for n in range(1, POOL_SETS)]
        return [first.data, *self._in_threads(lambda s: self._draw(case, s), seeds)]

    def _draw(self, case: Case, seed: int) -> Any:
        """The problem's ``generate_input`` for ``case`` with ``seed``, on the run's device, its
        output buffers (``output_buffers``) filled with 0xFF bytes (:func:`~kernelrank.runner.judge.output_rules.poison`)."""
        data = self.reference.generate_input(device=self.device, **dict(case.params, seed=seed))
        poison(data, self._dests(data))
        return data

    def _dests(self, data: Any) -> dict[str, list[Any]]:
        """The problem's output buffers in ``data``: name to indices and keys
        (:func:`~kernelrank.runner.judge.output_rules.buffer_keys`); empty for most problems."""
        return buffer_keys(self.definition, data) if self.definition.output_buffers else {}

    def _in_threads(self, work: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        """``work`` of each item, in order, in the judge's threads where there are several items
        and CPUs; the first item's exception in their order is raised once every item's work has
        ended (none is left running on a process the caller then closes)."""
        if len(items) < 2 or self.cpus < 2:
            return [work(item) for item in items]
        futures = [self._workers().submit(work, item) for item in items]
        wait(futures)
        return [f.result() for f in futures]

    def _prepare_batch(self, case: Case, seeds: list[int], paired: PairedCase | None = None) -> list[InputSet]:
        """The input sets of a batch, prepared in the judge's threads (one per CPU: both children
        are frozen meanwhile, and each set is its own work). A reference that draws from torch's
        global generator (KernelBench's ``get_inputs`` under ``manual_seed``) may then get inputs
        that are not exactly those of their seed: still fresh and random, and each expected output
        is computed from its own inputs (its model, built under its own seed, is built on the
        case's first input set, which is prepared alone before any batch)."""
        return self._in_threads(lambda s: self._prepare(case, s, paired), seeds)

    def _copy(self, pending: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """The copies of a request's placing (:meth:`~kernelrank.runner.judge.slots.Arena.place_sets`),
        in the judge's threads: both children are frozen, and ``copy_`` releases the GIL."""
        self._in_threads(lambda item: item[0].copy_(item[1]), pending)

    def _workers(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.cpus, thread_name_prefix="kernelrank-judge")
        return self._pool
