"""Returns a lazy tensor subclass: the softmax is only computed when someone reads the output.

Class: lazy tensor subclass
Expected: failed
Message: plain torch.Tensor

``custom_kernel`` returns at once an empty ``LazySoftmax`` holding a reference to the input; the
real work runs in ``__torch_function__`` the first time any torch function touches the output, that
is inside the harness's copy or comparison, after the timer stopped. The timed call costs only an
allocation. A working defence accepts only a plain ``torch.Tensor`` (exact type) as output.
"""

import torch


class LazySoftmax(torch.Tensor):
    @staticmethod
    def __new__(cls, x):
        out = torch.Tensor._make_subclass(cls, torch.empty_like(x))
        out._pending = x
        return out

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in args:
            if isinstance(a, LazySoftmax) and getattr(a, "_pending", None) is not None:
                x, a._pending = a._pending, None
                with torch._C.DisableTorchFunctionSubclass():
                    a.copy_(torch.softmax(x.float(), dim=-1).to(x.dtype))
        return super().__torch_function__(func, types, args, kwargs or {})


def custom_kernel(data):
    (x,) = data
    return LazySoftmax(x)
