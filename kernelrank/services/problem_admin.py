"""Pushing a problem: an admin's upload becomes a new problem or a new revision of one.

The upload is an archive (tar, optionally gzip/bzip2/xz compressed) holding ``problem.yaml`` at its
top and the reference folder's files under ``reference/`` (``reference/reference.py``,
``reference/templates/...``): what ``kernelrank problems push problems/NAME`` packs from
``problems/NAME/problem.yaml`` and ``reference_kernels/NAME/``.

Unpacking never trusts a member's name: absolute paths, ``..``, links, devices and any file outside
those two places are refused with the offending name, and the archive and its unpacked content are
bounded (``limit`` bytes each, :data:`MAX_FILES` files). The content is written to a private
temporary folder laid out as ``problems/`` and ``reference_kernels/``, loaded and hashed exactly
like a problem on disk (so pushing the folder that ``serve`` loads gives the same revision), its
reference checked against its own tests, and only then stored.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelrank.db.models import Problem as ProblemRow
from kernelrank.db.models import ProblemRevision
from kernelrank.problems import DEFINITION_FILE, Problem, ProblemError, load_problem
from kernelrank.services import Invalid, TooLarge
from kernelrank.services.problems import sync_problem
from kernelrank.services.reference_check import ReferenceCheck

#: Most files an upload may hold.
MAX_FILES = 200
#: The archive's folder holding the reference's files.
REFERENCE_FOLDER = "reference"


@dataclass(frozen=True)
class PushResult:
    """What a push did: ``revision`` is now current; ``new_problem`` / ``new_revision`` say
    whether the name / the content hash was seen for the first time."""

    revision: ProblemRevision
    new_problem: bool
    new_revision: bool


def _member_path(member: tarfile.TarInfo) -> PurePosixPath:
    """The member's relative path, or why it is refused.

    Raises:
        Invalid: absolute, with ``..`` or empty parts, a link or special file, outside
            ``problem.yaml`` and ``reference/``.
    """
    name = member.name
    if "\\" in name or "\0" in name:
        raise Invalid(f"archive member {name!r}: backslashes and NUL are not allowed in names")
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise Invalid(f"archive member {name!r}: absolute paths and '..' are not allowed")
    parts = [p for p in path.parts if p != "."]
    if not parts:
        raise Invalid(f"archive member {name!r}: empty path")
    if not (member.isfile() or member.isdir()):
        raise Invalid(f"archive member {name!r}: only regular files and folders are allowed (no links or devices)")
    rel = PurePosixPath(*parts)
    if member.isfile() and rel.as_posix() != DEFINITION_FILE and parts[0] != REFERENCE_FOLDER:
        raise Invalid(f"archive member {name!r}: expected {DEFINITION_FILE} and files under {REFERENCE_FOLDER}/")
    if member.isfile() and parts[0] == REFERENCE_FOLDER and len(parts) < 2:
        raise Invalid(f"archive member {name!r}: {REFERENCE_FOLDER} must be a folder")
    return rel


def unpack(archive: bytes, dest: Path, limit: int) -> dict[str, bytes]:
    """Read the upload's files (``{relative path: content}``) and write them under ``dest`` as
    ``problems/<name>/problem.yaml`` and ``reference_kernels/<name>/...``; returns the files.

    Raises:
        TooLarge: the archive, or its unpacked files together, over ``limit`` bytes; over
            :data:`MAX_FILES` files.
        Invalid: not a tar archive, an unsafe or unexpected member, no ``problem.yaml`` or no
            ``name`` in it.
    """
    if len(archive) > limit:
        raise TooLarge(f"the upload is {len(archive)} bytes; the limit is {limit} bytes")
    files: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:*") as tar:
            for member in tar:
                rel = _member_path(member)
                if member.isdir():
                    continue
                if len(files) >= MAX_FILES:
                    raise TooLarge(f"the upload holds more than {MAX_FILES} files")
                total += member.size
                if total > limit:
                    raise TooLarge(f"the upload's files are over {limit} bytes unpacked")
                if rel.as_posix() in files:
                    raise Invalid(f"archive member {member.name!r} appears twice")
                data = tar.extractfile(member)
                files[rel.as_posix()] = data.read() if data is not None else b""
    except (tarfile.TarError, EOFError, OSError) as e:
        raise Invalid(f"the upload is not a readable tar archive (.tar, .tar.gz): {e}") from None
    if DEFINITION_FILE not in files:
        raise Invalid(f"the upload has no {DEFINITION_FILE} at its top")
    name = _definition_name(files[DEFINITION_FILE])
    problem_dir = dest / "problems" / name
    reference_dir = dest / "reference_kernels" / name
    problem_dir.mkdir(parents=True)
    reference_dir.mkdir(parents=True)
    for rel, content in files.items():
        target = problem_dir / rel if rel == DEFINITION_FILE else reference_dir.joinpath(*PurePosixPath(rel).parts[1:])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return files


def _definition_name(text: bytes) -> str:
    """The ``name`` of a definition, checked to be a safe folder name.

    Raises:
        Invalid: unreadable YAML, no mapping, no valid ``name``.
    """
    import re

    try:
        raw = yaml.safe_load(text.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise Invalid(f"{DEFINITION_FILE}: cannot read YAML: {e}") from None
    name = raw.get("name") if isinstance(raw, dict) else None
    if not isinstance(name, str) or not re.match(r"^[a-z][a-z0-9_]{0,63}$", name):
        raise Invalid(f"{DEFINITION_FILE}: 'name' must be 1-64 lowercase letters, digits or '_', "
                      "starting with a letter")
    return name


def load_upload(archive: bytes, workdir: Path, limit: int) -> Problem:
    """Unpack (see :func:`unpack`) into ``workdir`` and load the problem as from disk.

    Raises:
        TooLarge, Invalid: as :func:`unpack`; Invalid also for a definition that fails validation
            or a reference without ``reference.py``.
    """
    unpack(archive, workdir, limit)
    name = next((workdir / "problems").iterdir()).name
    try:
        return load_problem(name, workdir / "problems", workdir / "reference_kernels")
    except ProblemError as e:
        raise Invalid(str(e).replace(str(workdir / "problems" / name) + "/", "").replace(str(workdir) + "/", "")) from None


def push_problem(session: Session, archive: bytes, limit: int, check: ReferenceCheck,
                 hidden: bool = False) -> PushResult:
    """Validate an uploaded problem and make it the current revision of its name.

    Validation: the definition parses (:class:`~kernelrank.problems.ProblemDefinition`), the
    reference module loads, and the reference passes its own test cases (``check``, the harness
    on the CPU). A content hash already stored is made current again (no new revision).

    Args:
        hidden: create a *new* problem hidden (admins only until opened); ignored for an existing one.

    Raises:
        TooLarge: over ``limit`` bytes (archive or unpacked) or too many files.
        Invalid: unsafe archive, invalid definition, a reference that fails its own tests (the
            message gives the harness's verdict and reason).
        Conflict: the content's revision belongs to another problem.
    """
    with tempfile.TemporaryDirectory(prefix="kernelrank-push-") as tmp:
        problem = load_upload(archive, Path(tmp), limit)
        try:
            spec = problem.spec()
        except (OSError, UnicodeDecodeError) as e:
            raise Invalid(f"cannot read the reference: {e}") from None
        reason = check(spec)
        if reason is not None:
            raise Invalid(f"the reference fails its own tests: {reason}")
        new_problem = session.scalar(select(ProblemRow.id).where(ProblemRow.name == problem.name)) is None
        new_revision = session.scalar(select(ProblemRevision.id).where(
            ProblemRevision.revision == problem.revision)) is None
        rev = sync_problem(session, problem, make_current=True)
        if new_problem and hidden:
            rev.problem.hidden = True
            session.flush()
    return PushResult(rev, new_problem, new_revision)


def pack_folder(definition_path: Path, reference_dir: Path) -> bytes:
    """The upload for a problem folder (the client side of :func:`push_problem`): a tar.gz of
    ``definition_path`` as ``problem.yaml`` and every file under ``reference_dir`` as
    ``reference/...`` (caches skipped). Links are refused rather than followed.

    Raises:
        ValueError: a link in the reference folder.
        OSError: unreadable files.
    """
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(definition_path, arcname=DEFINITION_FILE, recursive=False)
        for path in sorted(reference_dir.rglob("*")):
            rel = path.relative_to(reference_dir)
            if "__pycache__" in rel.parts or path.suffix == ".pyc":
                continue
            if path.is_symlink():
                raise ValueError(f"{path} is a link; push regular files only")
            if path.is_file():
                tar.add(path, arcname=f"{REFERENCE_FOLDER}/{rel.as_posix()}", recursive=False)
    return buf.getvalue()
