"""Profile mode in the child (the submission's process): ``torch.profiler`` or Triton's Proton over
a few calls on each benchmark case's input set, one request per set.

The judge places each set in the shared slots as it does a timed set and sends only its layout
(``harness._Evaluation._profile_sets``); the child builds the set's tensors over the slots
(:meth:`~kernelrank.runner.submission.mapping.Mapping.build`) and calls the kernel on them. The
profiler runs from the request marked ``first`` to the one marked ``last``, which answers the
results, so the table and the trace cover every case, each case's calls under its label.
"""

from __future__ import annotations

from typing import Any, Callable

from kernelrank.vocab import DeviceClass


class Profiler:
    """``torch.profiler`` across one profile's requests (see the module docstring), for a child on
    ``device`` whose ``timer`` waits for the device (``synchronize``)."""

    def __init__(self, device: str, timer: Any):
        self.device, self.timer = device, timer
        self.session: Any = None

    def request(self, msg: dict[str, Any], kernel: Callable[[Any], Any], data: Any) -> dict[str, Any]:
        """``calls`` calls (default 3) of ``kernel`` on ``data`` under ``label``; on ``last``, the
        profile ends: answers the table of kernels by self time (``rows`` rows, default 25) and
        writes the Chrome trace to ``trace_file``."""
        from torch.profiler import ProfilerActivity, profile, record_function

        if msg.get("first") or self.session is None:
            activities = [ProfilerActivity.CPU]
            if self.device == DeviceClass.cuda:  # pragma: no cover - GPU-only
                activities.append(ProfilerActivity.CUDA)
            self.session = profile(activities=activities, record_shapes=True)
            self.session.start()
        for _ in range(int(msg.get("calls", 3))):
            with record_function(str(msg.get("label", ""))):
                kernel(data)
            self.timer.synchronize()
        if not msg.get("last"):
            return {"ok": True}
        session, self.session = self.session, None
        session.stop()
        sort_by = "self_cuda_time_total" if self.device == DeviceClass.cuda else "self_cpu_time_total"
        table = session.key_averages().table(sort_by=sort_by, row_limit=int(msg.get("rows", 25)))
        session.export_chrome_trace(msg.get("trace_file", "trace.json"))
        return {"ok": True, "table": table}


class Proton:  # pragma: no cover - GPU-only: Proton needs CUPTI
    """Triton's Proton profiler across one profile's requests, one scope per case; writes a hatchet
    file. Its own process: CUPTI takes one subscriber, and ``torch.profiler`` in the same process
    would hold it (the judge starts a second child)."""

    def __init__(self, timer: Any):
        self.timer = timer
        self.started = False

    def request(self, msg: dict[str, Any], kernel: Callable[[Any], Any], data: Any) -> dict[str, Any]:
        """``calls`` calls of ``kernel`` on ``data`` in the scope ``label``; on ``last``, finalizes
        and answers the hatchet file's name (``proton``)."""
        import triton.profiler as proton

        if msg.get("first") or not self.started:
            proton.start(msg.get("proton_file", "proton"), hook="triton")
            self.started = True
        with proton.scope(str(msg.get("label", ""))):
            for _ in range(int(msg.get("calls", 3))):
                kernel(data)
        self.timer.synchronize()
        if not msg.get("last"):
            return {"ok": True}
        self.started = False
        proton.finalize()
        return {"ok": True, "proton": "proton.hatchet"}
