"""Computes the product while the harness hands the inputs over, before its own clock starts.

Class: work before the timed call
Expected: passed|rejected
Max speedup: 2.0

A ``torch.overrides.TorchFunctionMode`` installed at import sees every torch call of the process,
the harness's own included. When it sees the inputs being turned into tensors (``view`` on a
tensor of the input's shape), it computes ``a @ b`` there and keeps it; ``custom_kernel`` then
returns the kept product, so the child's clock around the call sees almost nothing. Against a
harness that decodes the inputs in a request of its own before the timed one, this was 78x "faster"
than the honest kernel. A working defence gives the child no code path outside the window: inputs
are placed in shared memory while the child is frozen and become tensors inside the window, whose
length the judge measures (thaw to frozen), so the product is paid for at its real cost.
"""

import torch
from torch.overrides import TorchFunctionMode

_ready = {}


class _Early(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if getattr(func, "__name__", "") == "view" and isinstance(out, torch.Tensor) and out.dim() == 2:
            _ready.setdefault("pending", []).append(out)
            pending = _ready["pending"]
            if len(pending) >= 2:
                a, b = pending[-2], pending[-1]
                if a.shape[1] == b.shape[0]:
                    # (the mode is off inside its own handler: no recursion)
                    # the reference's own work (torch.mm in the inputs' dtype): on a CPU without
                    # bfloat16 matmul units float32 is 100x faster, which no attack needs to gain from
                    _ready["out"] = torch.mm(a, b)
                    _ready["key"] = (a.data_ptr(), b.data_ptr())
                    _ready["pending"] = []
        return out


_Early().__enter__()
print("[attack] torch function mode installed at import", flush=True)


def custom_kernel(data):
    a, b = data[0], data[1]
    if _ready.get("key") == (a.data_ptr(), b.data_ptr()) and "out" in _ready:
        return _ready.pop("out")
    return torch.mm(a, b)
