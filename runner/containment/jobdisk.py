"""A job's working folder (judge side): a disk of its own, a removal nothing in it can break, a sweep.

With the judge running as root, each child's working folder is a ``tmpfs`` of
``SandboxLimits.disk_bytes`` (the job's whole disk: the submission, its C++ build, its caches,
every file it writes there), mounted in the judge's mount namespace before the child starts, so the
child's namespace inherits it. A job that fills it gets ``ENOSPC`` (``No space left on device``),
not the host's disk; its pages are memory charged to the job's memory cgroup. Clean-up is an
unmount (``MNT_DETACH``): whatever the child made inside is gone with it, however deep or many.

Without root (a local ``kernelrank eval``) nothing is mounted: the folder is on the scratch disk,
bounded per file only (``RLIMIT_FSIZE``); the result's ``isolation.disk_bytes`` says which (``None``).

A judge that died leaves its mounts and folders: :func:`sweep` unmounts and removes the job folders
in a scratch folder whose judge process is gone (the folder's name carries its pid: ``kr-job-<pid>-``),
so it is safe beside live judges; a runner calls it at start and between jobs.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import tempfile
from pathlib import Path

from kernelrank.runner.containment import isolation, isolation_check

log = logging.getLogger(__name__)

#: Prefix of every job folder the sandbox makes (:func:`folder_prefix`); :func:`sweep` looks for it.
JOB_PREFIX = "kr-job-"


def folder_prefix() -> str:
    """``tempfile.mkdtemp``'s prefix for this judge's job folders: ``kr-job-<pid>-``."""
    return f"{JOB_PREFIX}{os.getpid()}-"


def _orphaned(name: str) -> bool:
    """Whether the job folder ``name`` belongs to a judge process that is gone (or to none)."""
    pid = name[len(JOB_PREFIX):].split("-", 1)[0]
    if not pid.isdigit():
        return True
    return int(pid) != os.getpid() and not os.path.exists(f"/proc/{pid}")


def mount(path: Path, size_bytes: int | None) -> bool:
    """Mount a ``tmpfs`` of ``size_bytes`` (mode 700) on the empty folder ``path``; whether it was
    mounted (``False`` without root, without a size, or where the mount is refused)."""
    if not size_bytes or os.geteuid() != 0:
        return False
    try:
        isolation.mount("tmpfs", str(path), "tmpfs", isolation.MS_NOSUID | isolation.MS_NODEV,
                        f"size={int(size_bytes)},mode=700")
    except OSError as e:
        log.warning("job disk: tmpfs on %s refused (%s): the folder stays on the scratch disk", path, e.strerror)
        return False
    return True


def unmount(path: Path) -> None:
    """Detach the job's ``tmpfs`` from ``path`` (its contents go once no process holds them).

    Raises:
        OSError: the unmount was refused (not a mount point, no privilege).
    """
    isolation.unmount(str(path))


def mounted_jobs(scratch: Path) -> list[Path]:
    """Job folders directly in ``scratch`` that are mount points in this mount namespace."""
    real = os.path.realpath(scratch)
    return [Path(point) for point in isolation_check.mounts(os.getpid())
            if os.path.dirname(point) == real and os.path.basename(point).startswith(JOB_PREFIX)]


def sweep(scratch: Path) -> int:
    """Unmount and remove the job folders that judges now gone left in ``scratch``; how many were
    removed. Folders of live judges (this one included) are left alone."""
    removed = 0
    for point in mounted_jobs(scratch):
        if not _orphaned(point.name):
            continue
        try:
            unmount(point)
        except OSError:
            log.warning("sweep: could not unmount %s", point, exc_info=True)
    try:
        entries = [p for p in Path(scratch).iterdir() if p.name.startswith(JOB_PREFIX) and _orphaned(p.name)]
    except OSError:
        return 0
    for path in entries:
        try:
            remove_tree(path)
            removed += 1
        except OSError:
            log.warning("sweep: could not remove %s", path, exc_info=True)
    return removed


def sweep_scratch(scratch: Path | None) -> None:
    """:func:`sweep` the scratch folder (``None``: the system's temporary folder), as a runner does
    before each run (a judge killed mid-job leaves its folders); never raises, logs what it did."""
    try:
        if swept := sweep(Path(scratch) if scratch else Path(tempfile.gettempdir())):
            log.warning("swept %d job folder(s) left by judges that are gone", swept)
    except OSError:
        log.warning("sweeping the scratch folder failed", exc_info=True)


def remove_tree(path: Path) -> None:
    """Delete a folder whatever the child made in it, without following symbolic links out of it.

    Iterative (a chain of folders thousands deep is no recursion), holding one folder's descriptor
    at a time (no limit on open files is reached) and opening each folder with ``O_NOFOLLOW``
    relative to its parent's descriptor (a link is unlinked, never entered). Going back up, the
    parent is opened as ``..`` and checked to be the folder it came from (device and inode). A
    folder the child made unreadable (mode 000, which stops a judge that is not root) is made
    accessible first. Called once every process of the job is gone, so nothing races it.

    Raises:
        OSError: what could not be removed (the folder itself may remain, partly emptied).
    """
    if path.is_symlink():
        path.unlink()
        return
    if not path.exists():
        return
    remove_contents(path)
    path.rmdir()


#: How a job's folders are opened: never through a link (:func:`copy_tree`, ``BuildCache``, ``SubmissionProcess``).
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str, dir_fd: int | None) -> int:
    """Open the folder ``name`` (relative to ``dir_fd``) without following a link, making it
    readable and searchable first when it is not."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=dir_fd)  # a folder (d_type said so), not a link
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)


def remove_contents(path: Path) -> None:
    """Empty the folder ``path`` depth first, one descriptor open at a time (:func:`remove_tree`)."""
    fd = _open_dir(str(path), None)
    names: list[str] = []  # the folders descended into, from ``path`` down
    inodes: list[tuple[int, int]] = []  # (device, inode) of each folder above the current one
    try:
        while True:
            sub = None
            try:
                os.fchmod(fd, 0o700)  # listable and writable, whoever made it otherwise
            except OSError:
                pass
            unlinked = 0
            with os.scandir(fd) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        sub = entry.name
                        break
                    os.unlink(entry.name, dir_fd=fd)
                    unlinked += 1
            if sub is None and unlinked:
                continue  # listed again until empty: unlinking while listing may skip entries
            if sub is not None:
                here = os.fstat(fd)
                child = _open_dir(sub, fd)
                os.close(fd)
                fd = child
                names.append(sub)
                inodes.append((here.st_dev, here.st_ino))
                continue
            if not names:
                return
            parent = os.open("..", DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != inodes.pop():
                raise OSError(f"{path}: a folder moved while it was removed")
            os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)


#: Most entries (files, links, folders) :func:`copy_tree` copies, and its deepest folder: an honest
#: C++ build is a dozen files two folders deep.
COPY_MAX_ENTRIES = 10_000
COPY_MAX_DEPTH = 16
#: Left out of a copied build folder: torch's build lock (a stale one would make the build wait for ever).
BUILD_LEFT_OUT = frozenset({"lock"})


def copy_tree(src_fd: int, dst_fd: int, uid: int | None, max_bytes: int, skip: frozenset[str] = frozenset()) -> int:
    """Copy the folder open at ``src_fd``, which a child wrote (hostile), into the empty folder open
    at ``dst_fd``; the bytes copied.

    Regular files keep their permission bits (no set-id bits) and times to the nanosecond (ninja
    judges a build up to date by them), folders are made, symbolic links are copied as links,
    never followed; anything else (FIFOs, sockets, devices) and names in ``skip`` are left out.
    Every name is opened relative to its folder's descriptor with ``O_NOFOLLOW``, so a link swapped
    in meanwhile is never followed; a file is copied to its size when opened. What is made is owned
    by ``uid`` (``None``: the judge's user).

    Raises:
        OSError: more than :data:`COPY_MAX_ENTRIES` entries, a folder deeper than
            :data:`COPY_MAX_DEPTH`, more than ``max_bytes`` bytes (``EFBIG``), or what the system
            refused (``ENOSPC`` on the destination's disk). What was copied so far stays.
    """
    total, entries = 0, 0
    pending: list[tuple[str, ...]] = [()]  # folders still to copy, as names below the two roots
    while pending:
        parts = pending.pop()
        src, dst = _open_below(src_fd, parts), _open_below(dst_fd, parts)
        try:
            with os.scandir(src) as listing:
                found = []
                for entry in listing:
                    entries += 1
                    if entries > COPY_MAX_ENTRIES:
                        raise OSError(errno.EFBIG, f"more than {COPY_MAX_ENTRIES} entries to copy")
                    found.append((entry.name, entry.is_symlink(), entry.is_dir(follow_symlinks=False)))
            for name, link, folder in found:
                if name in skip:
                    continue
                if link:
                    os.symlink(os.readlink(name, dir_fd=src), name, dir_fd=dst)
                    if uid is not None:
                        os.chown(name, uid, uid, dir_fd=dst, follow_symlinks=False)
                elif folder:
                    if len(parts) >= COPY_MAX_DEPTH:
                        raise OSError(errno.EFBIG, f"folders deeper than {COPY_MAX_DEPTH} to copy")
                    os.mkdir(name, 0o755, dir_fd=dst)
                    if uid is not None:
                        os.chown(name, uid, uid, dir_fd=dst, follow_symlinks=False)
                    pending.append((*parts, name))
                else:
                    total += _copy_file(name, src, dst, uid, max_bytes - total)
        finally:
            os.close(src)
            os.close(dst)
    return total


def _open_below(root_fd: int, parts: tuple[str, ...]) -> int:
    """A new descriptor of the folder ``parts`` below ``root_fd``, each step without following a link."""
    fd = os.dup(root_fd)
    for name in parts:
        try:
            below = os.open(name, DIR_FLAGS, dir_fd=fd)
        finally:
            os.close(fd)
        fd = below
    return fd


def _copy_file(name: str, src: int, dst: int, uid: int | None, room: int) -> int:
    """Copy the regular file ``name`` from folder ``src`` to a new file in ``dst`` (:func:`copy_tree`);
    the bytes copied (0: not a regular file when opened)."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return 0
        if st.st_size > room:
            raise OSError(errno.EFBIG, f"{name}: more bytes than the copy may take")
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                      stat.S_IMODE(st.st_mode) & 0o777, dir_fd=dst)
        try:
            done = 0
            while done < st.st_size:
                sent = os.sendfile(out, fd, done, st.st_size - done)
                if sent == 0:  # shortened meanwhile
                    break
                done += sent
            if uid is not None:
                os.fchown(out, uid, uid)
            os.fchmod(out, stat.S_IMODE(st.st_mode) & 0o777)  # not narrowed by the umask
            os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(out)
        return done
    finally:
        os.close(fd)
