"""torch's precompiled ``torch/extension.h``, built on the judge's side (trusted) before a child that
may use it starts: site-packages is read-only for the child.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import tempfile
from pathlib import Path


@functools.lru_cache(maxsize=None)
def pch_lock_path() -> Path:
    """The lock file judges hold while building the precompiled header of this Python's torch (in
    the host's temporary folder, one per torch installation)."""
    from torch.utils import cpp_extension

    tag = hashlib.sha256(str(cpp_extension._TORCH_PATH).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"kernelrank-pch-{tag}.lock"


def prepare_precompiled_header(extra_cflags: tuple[str, ...] = ("-O3",)) -> str:
    """Build torch's precompiled ``torch/extension.h`` for ``extra_cflags`` in site-packages, on
    the judge's side (trusted), when it is missing or built with other flags.

    Under isolation site-packages is read-only for the child, so ``load_inline(use_pch=True)``
    can only use a header built beforehand with the same flags (its signature file must match).
    Returns ``"ok"`` or why it could not be built (the child then reports the compile error).

    Judges on one machine (a runner and a local ``kernelrank eval``, or several runners sharing a
    Python) take an exclusive ``flock`` while they check and build it: torch removes the old header
    and writes the new one in place, so a second judge checking meanwhile would build it again over
    the first, and the first judge's child would compile against a half-written header (seen as a
    compile error of a correct C++ example while the service judged the same file). The lock file
    lies in the host's temporary folder, which children never see (theirs is a private tmpfs), so
    a submission cannot hold it to stall other judges.
    """
    try:
        from torch.utils import cpp_extension

        try:  # read-only is enough for flock, and works whoever created the file first
            lock_fd = os.open(pch_lock_path(), os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            lock_fd = None  # no temporary folder to share: build unlocked, as torch would
        try:
            if lock_fd is not None:
                fcntl.flock(lock_fd, fcntl.LOCK_EX)
            cpp_extension._check_and_build_extension_h_precompiler_headers(list(extra_cflags), None)
        finally:
            if lock_fd is not None:
                os.close(lock_fd)  # releases the lock
        return "ok"
    except Exception as e:  # noqa: BLE001 - no compiler, odd toolchain: the child reports its own error
        return f"{type(e).__name__}: {e}"[:500]
