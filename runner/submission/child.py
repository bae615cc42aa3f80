"""Entry point of the child process that runs submitted code (``python -m kernelrank.runner.submission.child``).

Before anything else the child isolates itself as the judge's plan says
(:func:`kernelrank.runner.containment.isolation.enter`: namespaces, read-only view, unprivileged user,
limits), then imports torch. Everything after that runs next to hostile code and is untrusted by
the judge: it only loads the submission, calls ``custom_kernel`` when asked, times calls with the
shared timer, and sends snapshots of outputs back over the private channel, with two tripwires
(outputs sharing memory with inputs or earlier outputs; functions the harness relies on replaced).
The judge checks every answer itself.

Usage: ``python -m kernelrank.runner.submission.child FD DEVICE THREADS PLAN`` where FD is the inherited
socket and PLAN the :class:`~kernelrank.runner.containment.isolation.Plan` as JSON;
``python -m kernelrank.runner.submission.child --probe PLAN`` applies the plan and prints what holds.
"""

from __future__ import annotations

import faulthandler
import importlib.util
import json
import os
import socket
import sys
import traceback
from typing import Any

from kernelrank.runner.containment.isolation import SETUP_FAILED, Plan, enter, probe_report
from kernelrank.runner.submission.steady import reserve_heap, resolve_vector_math, steady_allocator
from kernelrank.vocab import DeviceClass, Verdict

SUBMISSION_FILE = "submission.py"
_MESSAGE_LIMIT = 4096
#: torch's error when ``load_inline(use_pch=True)`` must rebuild the precompiled header, which the
#: sandbox cannot write (site-packages is read-only): the judge provides it for ``-O3`` only.
_PCH_FAILED = "Compile PreCompile Header fail"
_PCH_HINT = (" [the precompiled torch/extension.h is read-only here and built for extra_cflags=['-O3'] only:"
             " use exactly those flags with use_pch=True, or use_pch=False]")
_TRACEBACK_LIMIT = 16384


def _error_kind(exc: BaseException) -> str:
    """``compile_error`` for Python syntax, C++/CUDA build and Triton compilation failures,
    ``out_of_memory`` for torch's allocator out of device memory (``torch.cuda.OutOfMemoryError``,
    also under the budget :func:`_cap_device_memory` set), else ``runtime_error``."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(exc, torch.cuda.OutOfMemoryError):
        return Verdict.out_of_memory.value
    name = type(exc).__name__
    if isinstance(exc, SyntaxError) or name in ("CompilationError", "CalledProcessError"):
        return "compile_error"
    if isinstance(exc, RuntimeError) and ("Error building extension" in str(exc) or _PCH_FAILED in str(exc)):
        return "compile_error"
    return "runtime_error"


def _cap_device_memory(budget: int) -> None:  # pragma: no cover - GPU-only: a CUDA device
    """Cap torch's caching allocator on the current device at ``budget`` bytes (its share of the
    device's total memory, ``torch.cuda.set_per_process_memory_fraction``), so that an allocation
    past it raises ``torch.cuda.OutOfMemoryError`` here rather than starving the judge or the
    reference. Submitted code can lift it: the judge's own measure is what decides
    (:mod:`kernelrank.runner.judge.devmem`)."""
    import torch

    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, budget / total))


#: This package's folder: frames in it are the harness's (the child, the timer), not the submission's.
_HARNESS_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _own_frames(stack: traceback.StackSummary, submission: str) -> traceback.StackSummary:
    """The frames from the submission's first one on; without one (a syntax error, a failure in a
    module the problem ships), every frame but the harness's and importlib's."""
    frames = list(stack)
    first = next((i for i, f in enumerate(frames) if f.filename == submission), None)
    if first is not None:
        frames = frames[first:]
    else:
        frames = [f for f in frames if not (f.filename.startswith(_HARNESS_DIR)
                                            or f.filename.startswith("<frozen importlib"))]
    return traceback.StackSummary.from_list(frames)


def submission_traceback(exc: BaseException, submission: str | None = None) -> str:
    """The formatted traceback of ``exc`` starting at the submission's own frame
    (``submission``: the path it was loaded from, default this folder's :data:`SUBMISSION_FILE`):
    the harness's frames that called it (this module's request loop, the timer, importlib) are
    dropped, in every chained exception too (``raise ... from``, exceptions during handling)."""
    path = submission or os.path.abspath(SUBMISSION_FILE)
    top = traceback.TracebackException.from_exception(exc)
    todo, seen = [top], set()
    while todo:
        t = todo.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        t.stack = _own_frames(t.stack, path)
        todo += [x for x in (t.__cause__, t.__context__) if x is not None]
        todo += list(getattr(t, "exceptions", None) or [])  # an ExceptionGroup's members
    return "".join(top.format())


def _error(exc: BaseException) -> dict[str, Any]:
    tb = submission_traceback(exc)
    hint = _PCH_HINT if _PCH_FAILED in str(exc) else ""
    return {
        "ok": False,
        "kind": _error_kind(exc),
        "message": f"{type(exc).__name__}: {exc}"[:_MESSAGE_LIMIT - len(hint)] + hint,
        "traceback": tb[-_TRACEBACK_LIMIT:],
    }


class ChildLoop:
    """Serves the judge's requests: ``hello``, ``load``, ``go``, ``reserve``, ``profile``, ``proton``, ``exit``. Every answer names the watched functions found replaced, if any
    (``tampered``), and carries the fingerprint of the watched objects (``integrity``)."""

    def __init__(self, channel: Any, device: str, slots_fd: int = -1):
        from kernelrank.runner.submission.integrity import Integrity
        from kernelrank.runner.submission.profiling import Profiler
        from kernelrank.runner.timing import WARMUP_MAX_CALLS, WARMUP_MIN_CALLS, WARMUP_SECONDS, make_timer

        self.channel = channel
        self.device = device
        self.timer = make_timer(device)
        self.kernel: Any = None
        self.warmup_seconds = WARMUP_SECONDS[device]
        self.warmup_max_calls = WARMUP_MAX_CALLS
        self.warmup_min_calls = WARMUP_MIN_CALLS
        self.previous = PreviousOutput()
        #: the submission's outputs this process still holds (the last request's, which the judge
        #: read in place, and the previous call's), let go inside the next call's clock (:meth:`_call`)
        self.pending: list[Any] = []
        self.slots: Any = None
        self.calls = 0
        #: launches of Triton kernels under Triton's interpreter so far (:meth:`_interpreted_launches`)
        self.interpreted = 0
        if slots_fd >= 0:
            from kernelrank.runner.submission.mapping import Mapping
            from kernelrank.runner.slotformat import CudaVmm

            # on CUDA the judge's input sets and the output slot are device memory it passes as a descriptor
            self.slots = Mapping(slots_fd, ipc=CudaVmm() if device == DeviceClass.cuda else None)
        self.profiler = Profiler(device, self.timer)
        self.proton: Any = None
        self.integrity = Integrity(self.timer, self)
        self.integrity.record()

    def serve(self) -> None:
        while True:
            msg = self.channel.recv(device=self.device)
            op = msg.get("op") if isinstance(msg, dict) else None
            if op == "exit":
                self.channel.send({"ok": True})
                return
            handler = getattr(self, f"op_{op}", None)
            if handler is None:
                reply: dict[str, Any] = {"ok": False, "kind": "protocol", "message": f"unknown op {op!r}"}
            else:
                try:
                    reply = handler(msg)
                except BaseException as exc:  # noqa: BLE001 - SystemExit from submitted code is a verdict too
                    reply = _error(exc)
            tampered, reply["integrity"] = self.integrity.check()
            if tampered:
                reply["tampered"] = tampered
            self.channel.send(reply)

    # -- operations ---------------------------------------------------------------------------
    def op_hello(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Isolation is in place; start torch's intra-op thread pool now, so threads seen after
        the submission's calls are compared with a baseline that already has it; freeze the
        objects made so far out of the garbage collector's way. With ``device_memory_bytes`` (the
        problem's budget) on CUDA, torch's allocator is capped at it before the submission is
        imported (:func:`_cap_device_memory`; the judge measures from outside as well)."""
        import gc

        import torch

        budget = msg.get("device_memory_bytes")
        if self.device == DeviceClass.cuda and type(budget) is int and budget > 0:  # pragma: no cover - GPU-only
            _cap_device_memory(budget)
        torch.ones(1 << 20).mul_(2)
        # bytes 0..63 at a known address: the judge checks it can read this process's memory
        # (outputs are then read in place, see mapping.Mapping.put_output)
        self.memory_probe = torch.arange(64, dtype=torch.uint8)
        # Everything imported so far (torch: ~10^5 objects) moves to the collector's permanent
        # generation, so a full collection that falls inside a timed call walks only what was made
        # since (such collections were seen as 20-50 ms outliers among 5 ms calls).
        gc.freeze()
        return {"ok": True, "memory_probe": self.memory_probe.data_ptr()}

    def op_load(self, msg: dict[str, Any]) -> dict[str, Any]:
        # [imported problems] modules the problem's reference ships for submissions
        # (GPU MODE's ``task``/``utils``), installed from their source text before the submission runs.
        _install_modules(msg.get("modules") or {})
        spec = importlib.util.spec_from_file_location("submission", os.path.abspath(SUBMISSION_FILE))
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {SUBMISSION_FILE}")
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        spec.loader.exec_module(module)
        kernel = getattr(module, "custom_kernel", None)
        if not callable(kernel) and msg.get("adapter"):
            # the problem's own convention (KernelBench's ``ModelNew``) made into custom_kernel
            kernel = _adapt(module, str(msg["adapter"]))
        if not callable(kernel):
            return {"ok": False, "kind": "compile_error",
                    "message": "the submission defines no callable custom_kernel(data)"}
        self.kernel = kernel
        return {"ok": True}

    def op_go(self, msg: dict[str, Any]) -> dict[str, Any]:
        """``repeat`` calls back to back (default 1) on the input set the judge placed in the shared
        slots (``inputs``: its layout, :class:`~kernelrank.runner.submission.mapping.Mapping`), each timed by the
        device's timer; the last call's output is copied into the output slot. Answers the claimed
        times (``times_ns``) and the output's description. With several input sets (``inputs``
        has ``sets``: :meth:`~kernelrank.runner.judge.slots.Arena.place_sets`), one call on each, in
        order, each output into its own slot: ``times_ns`` per call and ``outs``, per call its
        output's description. Test calls, warm-up calls and timed
        calls are all this one request: the child cannot tell them apart. The child keeps nothing
        of any output (see :class:`PreviousOutput`), as ``torch.utils.benchmark.Timer``'s loop
        keeps nothing."""
        if self.slots is None:
            return {"ok": False, "kind": "protocol", "message": "no shared slots"}
        self._hold_back()
        sets = msg["inputs"].get("sets")
        if sets is not None:
            return self._go_sets(msg, sets)
        with judges_own():
            data = self.slots.build(msg["inputs"], self.device)
            inputs = _storages(data)
        times: list[int] = []
        alias: str | None = None
        out: Any = None
        repeat = max(1, int(msg.get("repeat", 1)))
        launches = self._interpreted_launches()
        if msg.get("graph") and hasattr(self.timer, "time_graph"):  # pragma: no cover - GPU-only: CUDA graphs
            # the problem's timing.cuda.cuda_graph: the calls captured in one graph, launched once
            self.calls += repeat
            self.pending.clear()  # not timed by events around a captured graph: let go before it
            out, times = self.timer.time_graph(self.kernel, data, repeat)
            with judges_own():
                alias = _alias(out, inputs, self.previous, self.calls, self.slots.dests)
                self.previous.track(out, self.slots.dests)
        for i in range(0 if times else repeat):
            if i:
                self.pending.append(out)
            out = None
            self.calls += 1
            out, ns = self.timer.time_call(self._call, data)
            times.append(ns)
            with judges_own():
                alias = alias or _alias(out, inputs, self.previous, self.calls, self.slots.dests)
                self.previous.track(out, self.slots.dests)
        interpreted = self._interpreted_launches() > launches
        with judges_own():
            reply = {"ok": True, "times_ns": times, **self.timer.flush_report(), **self.slots.put_output(out, bool(msg.get("direct"))),
                     **({"alias": alias} if alias else {}), **({"interpreted": True} if interpreted else {})}
            self.pending.append(out)
            del out, data
        return reply

    def _hold_back(self) -> None:
        """At a request's start: the outputs the judge read in place (``slots.held``) join
        :attr:`pending`, to be let go inside the first call's clock, never before it."""
        if self.slots is not None and self.slots.held:
            self.pending.extend(self.slots.held)
            self.slots.held = []

    def _call(self, data: Any) -> Any:
        """The submission's call as the timer times it: first the outputs this process still holds
        are let go (so a finalizer or ``__del__`` of the submission's that fires on them runs
        inside the clock, timed, never in the child's bookkeeping before it; the reference pays
        the same frees), then ``custom_kernel(data)``."""
        pending = self.pending
        if pending:
            pending.clear()
        return self.kernel(data)

    def op_reserve(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Ready this process for the timed requests of a case, before the first: map the shared
        slots at ``size`` bytes with their pages faulted in (:meth:`~kernelrank.runner.submission.mapping.Mapping.prepare`),
        and give the heap ``heap`` bytes of free, faulted pages (:func:`~kernelrank.runner.submission.steady.reserve_heap`: pages
        already there cost little). The submission is not called."""
        if self.slots is None:
            return {"ok": False, "kind": "protocol", "message": "no shared slots"}
        self._hold_back()  # kept until the next call's clock: no submitted code runs in this request
        size = msg.get("size")
        if isinstance(size, int) and size > 0:
            self.slots.prepare(size)
        return {"ok": True, "reserved": reserve_heap(int(msg.get("heap", 0)))}

    def _go_sets(self, msg: dict[str, Any], sets: list[dict[str, Any]]) -> dict[str, Any]:
        """One call on each of several placed input sets (:meth:`op_go`)."""
        size = msg["inputs"]["size"]
        times: list[int] = []
        outs: list[dict[str, Any]] = []
        launches = self._interpreted_launches()
        for layout in sets:
            with judges_own():
                data = self.slots.build({"size": size, "data": layout["data"], "out": layout["out"],
                                        "dests": msg["inputs"].get("dests")}, self.device)
                inputs = _storages(data)
            self.calls += 1
            out, ns = self.timer.time_call(self._call, data)
            times.append(ns)
            with judges_own():
                alias = _alias(out, inputs, self.previous, self.calls, self.slots.dests)
                self.previous.track(out, self.slots.dests)
                outs.append({**self.slots.put_output(out, bool(msg.get("direct"))), **({"alias": alias} if alias else {})})
                self.pending.append(out)
                del out, data
        interpreted = self._interpreted_launches() > launches
        return {"ok": True, "times_ns": times, "outs": outs, **self.timer.flush_report(),
                **({"interpreted": True} if interpreted else {})}

    def op_profile(self, msg: dict[str, Any]) -> dict[str, Any]:
        """``torch.profiler`` over a few calls on the input set the judge placed in the slots
        (``inputs``, as ``go``'s), one request per benchmark case
        (:class:`~kernelrank.runner.submission.profiling.Profiler`): the last answers the table of
        kernels by self time and writes a Chrome trace to ``trace_file``."""
        return self._profiled(msg, self.profiler)

    def op_proton(self, msg: dict[str, Any]) -> dict[str, Any]:  # pragma: no cover - GPU-only: Proton needs CUPTI
        """Triton's Proton over a few calls on the placed input set, one scope per case
        (:class:`~kernelrank.runner.submission.profiling.Proton`); the last request writes a hatchet file."""
        from kernelrank.runner.submission.profiling import Proton

        if not isinstance(self.proton, Proton):
            self.proton = Proton(self.timer)
        return self._profiled(msg, self.proton)

    def _profiled(self, msg: dict[str, Any], profiler: Any) -> dict[str, Any]:
        if self.slots is None:
            return {"ok": False, "kind": "protocol", "message": "no shared slots"}
        self._hold_back()
        with judges_own():
            data = self.slots.build(msg["inputs"], self.device)
        return profiler.request(msg, self.kernel, data)

    # -- helpers ------------------------------------------------------------------------------
    def _interpreted_launches(self) -> int:
        """Triton kernel launches run by Triton's interpreter so far (``TRITON_INTERPRET=1``, the
        CPU device). Counts from the first request after the submission imported Triton: a
        wrapper around the interpreter's launcher (``GridExecutor.__call__``) is installed then.
        The judge shows such times as interpreted and never ranks them (a submission gains
        nothing by hiding it: interpreted calls are slower than any native code)."""
        module = sys.modules.get("triton.runtime.interpreter")
        launcher = getattr(module, "GridExecutor", None)
        if launcher is None:
            return self.interpreted
        call = launcher.__call__
        if not getattr(call, "_kernelrank_counted", False):
            worker = self

            def counted(*args: Any, **kwargs: Any) -> Any:
                worker.interpreted += 1
                return call(*args, **kwargs)

            counted._kernelrank_counted = True  # type: ignore[attr-defined]
            launcher.__call__ = counted
        return self.interpreted


def _install_modules(modules: dict[str, str]) -> None:
    """Execute each ``name: source`` as a fresh module registered under ``name`` (in
    order, so a later one may import an earlier one): the problem's helper files a submission
    imports (``from task import input_t``). They are copies in this process's memory; the
    problem's files and the judge's reference are not reachable from here."""
    import types

    for name, source in modules.items():
        module = types.ModuleType(name)
        module.__file__ = f"<problem module {name}>"
        sys.modules[name] = module
        exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102 - the problem's source


def _adapt(module: Any, adapter: str) -> Any:
    """Run the problem's adapter source (defining ``adapt(module) -> callable | None``)
    on the loaded submission; the callable it returns serves as ``custom_kernel``."""
    namespace: dict[str, Any] = {"__name__": "kernelrank_adapter"}
    exec(compile(adapter, "<problem adapter>", "exec"), namespace)  # noqa: S102 - the problem's source
    return namespace["adapt"](module)


def judges_own() -> Any:
    """A context for the child's own bookkeeping around a call (building the inputs from the slots,
    reading storages, checking aliases, copying the output into its slot): no ``__torch_function__``
    (a subclass's or a ``TorchFunctionMode`` the submission left active) and no
    ``TorchDispatchMode`` runs in it, so no submitted code is triggered by what the child does
    between the go-ahead and the call's clock, nor after it. The submission's modes are back for
    its own call.

    Cheap when no dispatch mode is active (0.6 µs, against 14 µs for taking the modes off): the
    dispatch stack's length, infrastructure modes included, says whether there are any."""
    import contextlib

    import torch

    if torch._C._len_torch_dispatch_stack() == 0:
        return torch._C.DisableTorchFunction()
    from torch.utils._python_dispatch import _disable_current_modes

    stack = contextlib.ExitStack()
    stack.enter_context(torch._C.DisableTorchFunction())
    stack.enter_context(_disable_current_modes())
    return stack


def _storages(value: Any, found: list[tuple[str, int, int]] | None = None) -> list[tuple[str, int, int]]:
    """``(device, first byte, bytes)`` of the storage of every tensor in a (nested) input.

    Recursive as a plain function (a nested function calling itself would be a reference cycle,
    garbage for the collector on every call; see ``wire._enc``)."""
    import torch

    found = [] if found is None else found
    if isinstance(value, torch.Tensor):
        s = value.untyped_storage()
        if s.nbytes():
            found.append((str(value.device), s.data_ptr(), s.nbytes()))
    elif isinstance(value, (list, tuple)):
        for x in value:
            _storages(x, found)
    elif isinstance(value, dict):
        for x in value.values():
            _storages(x, found)
    return found


class PreviousOutput:
    """What is known of the previous call's output without keeping it alive: per tensor of it (a
    plain tensor, or each one of a tuple, list or dict) a weak reference to the object and to its
    storage, with that storage's ``(device, first byte, bytes)``. The input set's output buffers
    are not tracked: the judge fills them afresh for every call and reads them from its own slot.

    Holding the previous output itself would keep its memory allocated during the next call and
    make every output land in fresh pages (a page fault per 4 KiB: measured +4.5 ms on a 16 MiB
    softmax output, 2.3x the call). A weak reference still catches a submission that returns
    memory it kept from an earlier call: then that storage is alive, and the new output overlaps
    it. Storage that died may legitimately be reused by the allocator and is not compared.
    """

    def __init__(self) -> None:
        self._objs: list[Any] = []
        self._spans: list[tuple[Any, list[tuple[str, int, int]]]] = []

    def track(self, out: Any, dests: dict[str, Any] | None = None) -> None:
        """Remember ``out``'s tensors (weakly) as the previous output, but for output buffers."""
        import weakref

        from kernelrank.runner.slotformat import output_leaves

        self._objs, self._spans = [], []
        for leaf in output_leaves(out) or []:
            if _is_dest(leaf, dests):
                continue
            self._objs.append(weakref.ref(leaf))
            span = _storages(leaf)
            if span:
                self._spans.append((weakref.ref(leaf.untyped_storage()), span))

    def same_object(self, out: Any) -> bool:
        """Whether ``out`` is a very tensor object returned by the previous call."""
        return any(ref() is out for ref in self._objs)

    def live_span(self) -> list[tuple[str, int, int]]:
        """The previous output's storage spans whose storage is still alive (else ``[]``)."""
        return [s for ref, span in self._spans if ref() is not None for s in span]


def _is_dest(leaf: Any, dests: dict[str, Any] | None) -> bool:
    """Whether ``leaf`` is one of the input set's output buffers itself (its memory, dtype and shape)."""
    from kernelrank.runner.submission.mapping import same_buffer

    return bool(dests) and any(same_buffer(leaf, buf) for buf in dests.values())  # type: ignore[union-attr]


def _alias(out: Any, inputs: list[tuple[str, int, int]], previous: PreviousOutput, call: int = 1,
           dests: dict[str, Any] | None = None) -> str | None:
    """Why ``out`` (a tensor, or any of the tensors of a tuple, list or dict) shares memory with an
    input of this request or with the previous call's output (only while the previous output's
    storage is alive: the submission kept it), or ``None``. A tensor that is one of the input set's
    output buffers (``dests``, the problem's ``output_buffers``) itself is no alias: it is where the
    call was asked to write; a part of one, or any other input, is."""
    from kernelrank.runner.slotformat import output_leaves

    for leaf in output_leaves(out) or []:  # the judge fails other types anyway
        if _is_dest(leaf, dests):
            continue
        mine = _storages(leaf)
        if not mine:
            continue
        device, start, size = mine[0]

        def overlaps(other: list[tuple[str, int, int]]) -> bool:
            return any(d == device and start < s + n and s < start + size for d, s, n in other)

        if overlaps(inputs):
            extra = " other than the output buffers" if dests else ""
            return (f"the output of call {call} shares memory with an input tensor{extra}: "
                    "return a new tensor, do not write into or return the inputs"
                    + (" (an output buffer may be returned whole, as it was given)" if dests else ""))
        if previous.same_object(leaf):
            return f"call {call} returned the same tensor object as the previous call: return a new tensor on every call"
        if overlaps(previous.live_span()):
            return (f"the output of call {call} shares memory with the previous call's output: "
                    "return a new tensor on every call")
    return None


def adapt_toolchain() -> None:
    """Make the build tools kernel authors use work on the read-only view.

    ``torch.utils.cpp_extension.load_inline(use_pch=False)`` (the default) deletes the precompiled
    ``torch/extension.h`` header when it exists; the judge builds that header into site-packages
    for ``use_pch=True`` submissions (:func:`~kernelrank.runner.containment.pch.prepare_precompiled_header`),
    where the child may not delete it. A build without the header must not fail for that: the
    removal is skipped when the folder is read-only (the header is then simply not used).
    """
    try:
        import torch.utils.cpp_extension as ext
    except ImportError:  # pragma: no cover - torch is a dependency
        return
    remove = getattr(ext, "remove_extension_h_precompiler_headers", None)
    if remove is None or getattr(remove, "_kernelrank_tolerant", False):
        return

    def tolerant_remove(*args: Any, **kwargs: Any) -> Any:
        try:
            return remove(*args, **kwargs)
        except OSError:
            return None

    tolerant_remove._kernelrank_tolerant = True  # type: ignore[attr-defined]
    ext.remove_extension_h_precompiler_headers = tolerant_remove


def main(argv: list[str]) -> int:
    """Isolate this process as planned, connect the channel, serve until ``exit`` or the channel
    closes. A failed set-up exits with :data:`~kernelrank.runner.containment.isolation.SETUP_FAILED`."""
    if argv[1] == "--probe":
        plan = Plan.from_json(argv[2])
        try:
            enter(plan)
        except OSError as e:
            print(f"sandbox set-up failed: {e}", file=sys.stderr)
            return SETUP_FAILED
        print(json.dumps(probe_report(plan)))
        return 0
    fd, slots_fd, device, threads, plan = int(argv[1]), int(argv[2]), argv[3], int(argv[4]), Plan.from_json(argv[5])
    return serve(fd, device, threads, plan, slots_fd)


def serve(fd: int, device: str, threads: int, plan: Plan, slots_fd: int = -1) -> int:
    """Isolate this process as planned, connect the channel on ``fd``, serve until ``exit`` or
    the channel closes; the process's exit status. Run by ``main`` in a fresh interpreter, or by
    :mod:`kernelrank.runner.submission.zygote` in a process forked with torch already imported."""
    try:
        enter(plan)
    except OSError as e:
        print(f"sandbox set-up failed: {e}", file=sys.stderr)
        return SETUP_FAILED
    # a crash (SIGSEGV, SIGABRT, SIGFPE, SIGBUS, SIGILL) writes "Fatal Python error: ..." and every
    # thread's Python traceback to the child's stderr, which the judge keeps in the run's logs and
    # quotes in the verdict (sandbox.SubmissionProcess._died): the child is PID 1 of its namespace,
    # which ignores the signals it sends itself, so abort() (a failed C assert, std::terminate)
    # ends in glibc's last resort, a SIGSEGV; without these words the verdict named only that
    faulthandler.enable(all_threads=True)
    from kernelrank.runner.wire import STACK_FILE, STACK_SIGNAL

    # where a call is when its deadline passes (compiling, or the submission's line that hangs)
    faulthandler.register(STACK_SIGNAL, file=open(STACK_FILE, "a"), all_threads=True)  # noqa: SIM115 - kept open
    sock = socket.socket(fileno=fd)
    steady_allocator()
    import torch  # after the judge set the environment (TRITON_INTERPRET on the CPU)

    if threads > 0:
        torch.set_num_threads(threads)
    resolve_vector_math()  # before any submitted code runs, from this one thread: see its docstring
    from kernelrank.runner.wire import MAX_FDS, Link, LinkClosed

    channel = Link(sock, max_fds=MAX_FDS)  # the device slots' descriptors come with the judge's requests
    try:
        adapt_toolchain()
        ChildLoop(channel, device, slots_fd).serve()
    except LinkClosed:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
