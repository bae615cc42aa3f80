"""A tripwire in the child for submitted code that patches what the harness relies on.

:class:`Integrity` records, before the submission is imported, the objects behind the names the
child's timing, snapshots and channel use: clocks in ``time``, ``torch.cuda.synchronize`` and
events, the ``torch.Tensor`` methods used to copy outputs, a few builtins, the timer's own
attributes, the methods of the timer's device interface and of the classes it uses (events,
streams, graphs: a method replaced on a class keeps the class itself, so identity of the class
alone is not enough), and every global and class method of the loaded ``kernelrank.runner`` modules. After
each request it reports the names now bound to other objects, and a fingerprint of what is bound
now, which the judge compares with the one it got before the submission was imported; either
difference fails the run.

This check runs inside the process it watches, so it cannot be trusted: submitted code can patch
the check itself, its record, or the reply carrying its findings (the fixture
``tests/fixtures/submissions/untimed_work.py`` re-takes the record and forges the fingerprint). It catches careless tampering
and makes the careful kind more work; what the judge relies on is outside the child: its own
copies of inputs and references, its own check of every output, and its wall clock around every
request.
"""

from __future__ import annotations

import builtins
import json
import socket
import sys
import time
import types
from typing import Any, Callable

#: ``torch.Tensor`` methods the child uses on outputs and inputs.
TENSOR_METHODS = ("detach", "to", "cpu", "contiguous", "clone", "copy_", "reshape", "view", "numel",
                  "element_size", "untyped_storage", "data_ptr", "is_contiguous", "dim", "size", "__class__")
_BUILTINS = ("type", "isinstance", "id", "len", "getattr", "hasattr", "callable", "int", "float", "str",
             "list", "tuple", "dict", "range", "zip", "min", "max", "sum")
_TIME = ("perf_counter_ns", "perf_counter", "monotonic", "monotonic_ns", "time", "time_ns")
_TORCH = ("Tensor", "empty", "frombuffer", "zeros", "no_grad", "set_num_threads", "device")
_CUDA = ("synchronize", "Event", "current_stream", "Stream", "CUDAGraph", "graph")
#: ``torch.cuda`` classes whose methods (through their bases) are watched: replacing
#: ``Event.elapsed_time`` on the class leaves ``torch.cuda.Event`` itself untouched.
_CUDA_CLASSES = ("Event", "Stream", "CUDAGraph")
_RUNNER_PREFIX = "kernelrank.runner"
_CHILD_MODULE = "kernelrank.runner.submission.child"


def _attr(obj: Any, name: str) -> Callable[[], Any]:
    return lambda: getattr(obj, name, None)


def _static(obj: Any, name: str) -> Callable[[], Any]:
    """Getter of what ``obj.name`` is bound to (for an instance: its own attribute, else its class's
    and bases'), without calling descriptors: a stable object, the function or descriptor itself.
    Reads the live ``__dict__`` views directly (``inspect.getattr_static`` took 4x longer, and the
    check runs inside every window)."""
    cls = obj if isinstance(obj, type) else type(obj)
    dicts = [k.__dict__ for k in cls.__mro__ if k is not object]
    own = getattr(obj, "__dict__", None) if not isinstance(obj, type) else None
    if isinstance(own, dict):
        dicts.insert(0, own)  # type: ignore[arg-type]

    def get() -> Any:
        for d in dicts:
            if name in d:
                return d[name]
        return None

    return get


def _watch_class(watch: dict[str, Callable[[], Any]], prefix: str, obj: Any) -> None:
    """Watch every method (and descriptor) a class, or an instance through its class, has through
    its bases (``object`` excluded); for an instance, one set on the instance shadows it and is seen."""
    cls = obj if isinstance(obj, type) else type(obj)
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        names.update(n for n in vars(klass) if not n.startswith("__") or n in ("__init__", "__call__", "__new__"))
    for name in sorted(names):
        watch[f"{prefix}.{name}"] = _static(obj, name)


def _watched(timer: Any, owner: Any) -> dict[str, Callable[[], Any]]:
    """Name -> getter of the object currently bound to that name."""
    import torch

    watch: dict[str, Callable[[], Any]] = {}
    if owner is not None:
        for name in ("timer", "channel", "integrity", "__class__"):
            watch[f"worker.{name}"] = _attr(owner, name)
    for name in _TIME:
        watch[f"time.{name}"] = _attr(time, name)
    for name in _BUILTINS:
        watch[f"builtins.{name}"] = _attr(builtins, name)
    for name in ("dumps", "loads"):
        watch[f"json.{name}"] = _attr(json, name)
    for name in ("sendall", "recv_into", "settimeout"):
        watch[f"socket.socket.{name}"] = _attr(socket.socket, name)
    for name in _TORCH:
        watch[f"torch.{name}"] = _attr(torch, name)
    for name in _CUDA:
        watch[f"torch.cuda.{name}"] = _attr(torch.cuda, name)
    for name in _CUDA_CLASSES:
        cls = getattr(torch.cuda, name, None)
        if isinstance(cls, type):
            _watch_class(watch, f"torch.cuda.{name}", cls)
    for name in TENSOR_METHODS:
        watch[f"torch.Tensor.{name}"] = _attr(torch.Tensor, name)
    watch["timer.__class__"] = _attr(timer, "__class__")
    for name in vars(timer):
        watch[f"timer.{name}"] = _attr(timer, name)
    _watch_class(watch, type(timer).__name__, timer)
    # the timer's device interface (CudaTimer.api: torch.cuda's functions and classes
    # as TorchCuda bound them, or a simulated device): its methods, what it bound, and the
    # methods of every class among those (events, graphs)
    api = getattr(timer, "api", None)
    if api is not None:
        _watch_class(watch, f"timer.api<{type(api).__name__}>", api)
        for name, value in vars(api).items():
            if callable(value):
                watch[f"timer.api.{name}"] = _attr(api, name)
                if isinstance(value, type):
                    _watch_class(watch, f"timer.api.{name}", value)
    for modname, module in _runner_modules():
        watch[f"sys.modules[{modname!r}]"] = (lambda n=modname: _module_named(n))
        for name, value in vars(module).items():
            if name.startswith("__") or isinstance(value, types.ModuleType):
                continue
            watch[f"{modname}.{name}"] = _attr(module, name)
            if isinstance(value, type) and value.__module__ in (modname, "__main__"):
                for meth in vars(value):
                    if not meth.startswith("__") or meth in ("__init__", "__call__"):
                        watch[f"{modname}.{name}.{meth}"] = (lambda c=value, m=meth: c.__dict__.get(m))
    return watch


def _module_named(name: str) -> Any:
    if name == _CHILD_MODULE and name not in sys.modules:
        return sys.modules.get("__main__")
    return sys.modules.get(name)


def _runner_modules() -> list[tuple[str, types.ModuleType]]:
    """The loaded ``kernelrank.runner`` modules; the child itself runs as ``__main__``."""
    found = [(n, m) for n, m in list(sys.modules.items())
             if n.startswith(_RUNNER_PREFIX) and isinstance(m, types.ModuleType) and n != _RUNNER_PREFIX]
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if main is not None and spec is not None and spec.name == _CHILD_MODULE and _CHILD_MODULE not in dict(found):
        found.append((_CHILD_MODULE, main))
    return found


class Integrity:
    """What to watch; ``owner`` is the child's worker, whose ``timer``, ``channel`` and
    ``integrity`` attributes are watched too.

    :meth:`record` (call it once everything is in place, before the submission is imported)
    fills ``baseline``: each watched name -> the object it was bound to (held, so an identity is
    never reused by a new object); :meth:`changed` lists the names bound to something else now.
    """

    def __init__(self, timer: Any, owner: Any = None):
        self._watch = _watched(timer, owner)
        self.baseline: dict[str, Any] = {}

    def record(self) -> None:
        """Take the record."""
        self.baseline = self.snapshot()

    def snapshot(self) -> dict[str, Any]:
        """Name -> the object bound to it now."""
        out = {}
        for name, get in self._watch.items():
            try:
                out[name] = get()
            except Exception:  # noqa: BLE001 - a getter broken by tampering is a change too
                out[name] = _Broken
        return out

    def changed(self, limit: int = 20) -> list[str]:
        """Names now bound to a different object than in the record (at most ``limit``)."""
        return self.check(limit)[0]

    def check(self, limit: int = 20) -> tuple[list[str], int]:
        """``(changed names, fingerprint)`` from one snapshot: the names bound to a different
        object than in the record (at most ``limit``), and :func:`fingerprint` of what is bound now.

        The child sends the fingerprint with every answer, and the judge compares it with the one
        of its first answer (``hello``, before the submission was imported). Re-taking the record
        (what a submission that found this object does to quiet :meth:`changed`) leaves that
        comparison standing; only a submission that also forges the fingerprint or the answers
        gets past it, and then the judge's wall clock is what remains.
        """
        now = self.snapshot()
        diff = [name for name, obj in self.baseline.items() if now.get(name) is not obj]
        return diff[:limit], fingerprint(now)


def fingerprint(snapshot: dict[str, Any]) -> int:
    """A 64-bit digest of which objects a snapshot holds (their identities, in watch order).
    Equal between two snapshots of one process exactly when no watched name was re-bound (the
    record holds every baseline object, so an identity is never reused). Snapshot and digest take
    about 0.2 µs per watched name (some 700 in the child, timing API included)."""
    return hash(tuple(id(obj) for obj in snapshot.values())) & ((1 << 64) - 1)


class _Broken:
    """Stands for a name whose lookup raised."""
