"""A submission's C++/CUDA build, kept from its first process for its later ones (judge side).

torch's ``load_inline`` builds in ``TORCH_EXTENSIONS_DIR``, which every namespaced child sees at one
path (:data:`~kernelrank.runner.containment.isolation.BUILD_VIEW`), so a copy of one process's
build folder is up to date for torch's ninja in another. Once a run's first process has loaded the
submission (and is frozen), the judge copies its build folder into a folder of its own here
(:meth:`BuildCache.keep`); every later process of the same source (the run's further timed
processes, and, with one cache per job, the secret run's) starts from a copy
(:meth:`BuildCache.seed`) instead of building again. Before, a C++ softmax leaderboard run readied
in 48-50 s, its four processes each building (bench/README.md).

The kept folder is a job folder like a child's (``kr-job-<pid>-`` in the scratch folder, a
``tmpfs`` of its own under a root judge, swept if the judge dies), holds one build at a time, and
every copy in or out is :func:`~kernelrank.runner.containment.jobdisk.copy_tree`'s: no link
followed, FIFOs, devices and torch's ``lock`` left out, bounded.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from kernelrank.runner.containment import jobdisk
from kernelrank.runner.containment.rlimits import SandboxLimits

log = logging.getLogger(__name__)


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


class BuildCache:
    """One kept build folder and the source it was built from (:mod:`module docs <kernelrank.runner.containment.buildcache>`).

    Args:
        scratch_dir: where the kept folder is made (``None``: the system's temporary folder).
        size_bytes: most bytes kept (the size of its ``tmpfs`` under a root judge); default: a
            child's whole disk (``SandboxLimits.disk_bytes``).
    """

    def __init__(self, scratch_dir: Path | None = None, size_bytes: int | None = None):
        self._scratch = scratch_dir
        self._size = size_bytes or SandboxLimits().disk_bytes or 1 << 30
        self._folder: Path | None = None
        self._disk = False
        self._digest: str | None = None

    def seed(self, child: Any, source: str) -> int | None:
        """Copy the kept build into ``child``'s build folder (a ``SubmissionProcess`` about to load
        ``source``); the bytes copied, or ``None``: nothing kept for that source, or not copied
        (the child then builds for itself)."""
        if self._folder is None or self._digest != _digest(source):
            return None
        fd = os.open(self._folder, jobdisk.DIR_FLAGS)
        try:
            return child.seed_build(fd)
        finally:
            os.close(fd)

    def keep(self, child: Any, source: str) -> int | None:
        """Keep the build folder of ``child`` (a ``SubmissionProcess`` that has loaded ``source``, frozen),
        in place of what was kept; the bytes kept, or ``None``: it built nothing, it is not namespaced
        (its build folder's path is its own), or the copy was refused (later processes build for themselves)."""
        self.close()
        if child.plan.build_view is None:
            return None
        src = -1
        try:
            src = child.build_folder()  # a link in its place (the child's doing) is refused
            with os.scandir(src) as entries:
                if next(entries, None) is None:
                    return None  # no C++ built: nothing to keep
            if self._scratch is not None:
                Path(self._scratch).mkdir(parents=True, exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix=jobdisk.folder_prefix(), dir=self._scratch))
            self._folder, self._disk = folder, jobdisk.mount(folder, self._size)
            dst = os.open(folder, jobdisk.DIR_FLAGS)
            try:
                kept = jobdisk.copy_tree(src, dst, None, self._size, skip=jobdisk.BUILD_LEFT_OUT)
            finally:
                os.close(dst)
        except OSError as e:
            log.info("build not kept (%s): later processes build for themselves", e)
            self.close()
            return None
        finally:
            if src >= 0:
                os.close(src)
        self._digest = _digest(source)
        return kept

    def close(self) -> None:
        """Remove what is kept (never raises: a folder left is swept with the judge's others)."""
        folder, self._folder, self._digest = self._folder, None, None
        if folder is None:
            return
        with contextlib.suppress(OSError):
            if self._disk:
                jobdisk.unmount(folder)
            jobdisk.remove_tree(folder)

    def __enter__(self) -> "BuildCache":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
