"""A submission's later processes start from its first process's build folder
(``buildcache.BuildCache``, ``SubmissionProcess.seed_build``, ``jobdisk.copy_tree``): each namespaced child sees its build
folder at one path, the copy keeps what ninja judges a build by, and nothing a hostile first process
leaves there makes the judge follow a link, copy a FIFO or a stale lock, or copy without bound."""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

import pytest

from kernelrank.runner.containment import isolation, isolation_check, jobdisk
from kernelrank.runner.containment.buildcache import BuildCache
from kernelrank.runner.containment.rlimits import SandboxLimits
from kernelrank.runner.containment.sandbox import SubmissionProcess

NAMESPACED = [m for m in ("setuid", "userns") if isolation_check.probe(m)[0]]


def _copy(src: Path, dst: Path, max_bytes: int = 1 << 20, uid: int | None = None) -> int:
    dst.mkdir(exist_ok=True)
    s, d = os.open(src, os.O_RDONLY | os.O_DIRECTORY), os.open(dst, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return jobdisk.copy_tree(s, d, uid, max_bytes, skip=frozenset({"lock"}))
    finally:
        os.close(s)
        os.close(d)


def test_copy_tree_keeps_contents_modes_and_times_and_leaves_out_the_rest(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "ext").mkdir(parents=True)
    (src / "ext" / "ext.so").write_bytes(b"\x7fELF" + bytes(range(256)) * 40)
    os.chmod(src / "ext" / "ext.so", 0o4755)  # set-uid asked for: never copied
    os.utime(src / "ext" / "ext.so", ns=(1_700_000_000_123_456_789, 1_700_000_000_987_654_321))
    (src / "ext" / ".ninja_log").write_text("# ninja log v5\n")
    (src / "ext" / "lock").write_text("")  # torch's build lock: a stale one would stall the build
    secret = tmp_path / "secret"
    secret.write_text("the judge's")
    (src / "ext" / "out").symlink_to(secret)
    os.mkfifo(src / "ext" / "fifo")
    dst = tmp_path / "dst"

    copied = _copy(src, dst)

    so = dst / "ext" / "ext.so"
    assert so.read_bytes() == (src / "ext" / "ext.so").read_bytes()
    assert copied == so.stat().st_size + len("# ninja log v5\n")
    assert stat.S_IMODE(so.stat().st_mode) == 0o755
    assert so.stat().st_mtime_ns == 1_700_000_000_987_654_321
    assert (dst / "ext" / ".ninja_log").read_text() == "# ninja log v5\n"
    assert os.readlink(dst / "ext" / "out") == str(secret)  # a link, as it was: its target not read
    assert sorted(os.listdir(dst / "ext")) == [".ninja_log", "ext.so", "out"]


def test_copy_tree_does_not_enter_a_linked_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private").write_text("not the child's")
    src = tmp_path / "src"
    src.mkdir()
    (src / "ext").symlink_to(outside, target_is_directory=True)
    dst = tmp_path / "dst"
    assert _copy(src, dst) == 0
    assert (dst / "ext").is_symlink() and os.readlink(dst / "ext") == str(outside)


def test_copy_tree_stops_at_its_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "big").write_bytes(b"x" * 5000)
    with pytest.raises(OSError) as e:
        _copy(src, tmp_path / "small", max_bytes=4096)
    assert e.value.errno == errno.EFBIG

    deep = tmp_path / "deep"
    Path(deep, *["d"] * (jobdisk.COPY_MAX_DEPTH + 2)).mkdir(parents=True)
    with pytest.raises(OSError, match="deeper"):
        _copy(deep, tmp_path / "deep-copy")

    monkeypatch.setattr(jobdisk, "COPY_MAX_ENTRIES", 3)
    many = tmp_path / "many"
    many.mkdir()
    for i in range(5):
        (many / str(i)).write_text("")
    with pytest.raises(OSError, match="entries"):
        _copy(many, tmp_path / "many-copy")


#: At load, a first process "builds" (writes into its build folder, with what a hostile one would
#: leave there); every process prints where its build folder is and what it found there.
BUILDS = '''
import os

d = os.environ["TORCH_EXTENSIONS_DIR"]
print("build folder", d, sorted(os.listdir(d)), flush=True)
if not os.path.exists(os.path.join(d, "ext", "ext.so")):
    os.makedirs(os.path.join(d, "ext"))
    with open(os.path.join(d, "ext", "ext.so"), "w") as f:
        f.write("built once")
    open(os.path.join(d, "ext", "lock"), "w").close()
    os.symlink("/etc/hostname", os.path.join(d, "link"))
    os.mkfifo(os.path.join(d, "fifo"))


def custom_kernel(data):
    return data[0]
'''


def _loaded(tmp_path: Path, method: str, source: str = BUILDS) -> SubmissionProcess:
    child = SubmissionProcess(source, "cpu", 2, scratch_dir=tmp_path, method=method,
                              limits=SandboxLimits().resolved("cpu", 60.0))
    child.start(time.monotonic() + 60)
    child.request({"op": "load"}, time.monotonic() + 60)
    return child


@pytest.mark.skipif(not NAMESPACED, reason="no namespaced isolation method works on this host")
@pytest.mark.parametrize("method", NAMESPACED)
def test_a_later_process_finds_the_first_ones_build_at_the_same_path(tmp_path: Path, method: str) -> None:
    processes = []
    with BuildCache(tmp_path / "kept") as builds:
        try:
            processes.append(_loaded(tmp_path, method))
            assert builds.keep(processes[0], BUILDS) == len("built once")
            later = SubmissionProcess(BUILDS, "cpu", 2, scratch_dir=tmp_path, method=method,
                                      limits=SandboxLimits().resolved("cpu", 60.0))
            processes.append(later)
            later.start(time.monotonic() + 60)
            assert builds.seed(later, BUILDS.replace("print", "print ")) is None  # another source: not seeded
            assert builds.seed(later, BUILDS) == len("built once")
            later.request({"op": "load"}, time.monotonic() + 60)
            for p in processes:
                p.close()
            assert processes[0].logs()["stdout"].strip() == f"build folder {isolation.BUILD_VIEW} []"
            # the same path, the build there (no FIFO, no lock); the link copied as a link
            assert later.logs()["stdout"].strip() == f"build folder {isolation.BUILD_VIEW} ['ext', 'link']"
        finally:
            for p in processes:
                p.close(graceful=False)
    assert not list((tmp_path / "kept").iterdir())  # the kept build removed with the cache


@pytest.mark.skipif(not NAMESPACED, reason="no namespaced isolation method works on this host")
def test_nothing_is_kept_of_an_empty_build_or_a_link_in_its_place(tmp_path: Path) -> None:
    swapped = 'import os, shutil\nd = os.environ["TORCH_EXTENSIONS_DIR"]\n' \
              'os.rmdir(os.path.join(os.environ["HOME"], "build"))\nos.symlink("/etc", os.path.join(os.environ["HOME"], "build"))\n' \
              'def custom_kernel(data):\n    return data[0]\n'
    with BuildCache(tmp_path / "kept") as builds:
        for source in ("def custom_kernel(data):\n    return data[0]\n", swapped):
            child = _loaded(tmp_path, NAMESPACED[0], source)
            try:
                assert (child.workdir / "build").is_symlink() == (source == swapped)
                assert builds.keep(child, source) is None
            finally:
                child.close(graceful=False)
    assert not (tmp_path / "kept").exists() or not list((tmp_path / "kept").iterdir())


def test_without_namespaces_nothing_is_kept_or_copied(tmp_path: Path) -> None:
    """Without a mount namespace each process's build folder is at its own path, where a copied
    build would be out of date for ninja: each builds for itself."""
    first = _loaded(tmp_path, "none")
    later = SubmissionProcess(BUILDS, "cpu", 2, scratch_dir=tmp_path, method="none")
    try:
        assert os.listdir(first.workdir / "build")  # it "built"
        with BuildCache(tmp_path / "kept") as builds:
            assert builds.keep(first, BUILDS) is None
            assert builds.seed(later, BUILDS) is None
        src = first.build_folder()
        try:
            assert later.seed_build(src) is None
        finally:
            os.close(src)
        assert os.listdir(later.workdir / "build") == []
    finally:
        first.close(graceful=False)
        later.close(graceful=False)
