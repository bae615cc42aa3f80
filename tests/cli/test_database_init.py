"""Admin commands that open the server's database (``users``, ``export``, ``problems
code-open``) never create one by accident: run where there is none, they refuse, naming the data
folder they looked in; ``users create --init`` creates it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_client import KERNELRANK


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KERNELRANK_")}
    return subprocess.run([KERNELRANK, *args], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**clean, "COLUMNS": "300", **env}, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("args", [("users", "create", "carol"), ("users", "passwd", "carol", "--clear"),
                                  ("export", "softmax"), ("problems", "code-open", "softmax")])
def test_without_a_database_admin_commands_refuse_and_name_the_folder(tmp_path: Path, args: tuple[str, ...]) -> None:
    p = _run(tmp_path, *args)  # the default data folder: ./.kernelrank, here empty
    assert p.returncode == 3, p.stderr
    data = (tmp_path / ".kernelrank").resolve()
    assert f"no KernelRank database in {data / 'kernelrank.db'} (data folder {data}, KERNELRANK_DATA_DIR)" in p.stderr
    assert "--init" in p.stderr and p.stdout == ""
    assert not (data / "kernelrank.db").exists()


def test_init_creates_the_database_and_later_commands_use_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    p = _run(tmp_path, "users", "create", "carol", "--admin", "--init", KERNELRANK_DATA_DIR=str(data))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().startswith("kr_") and (data / "kernelrank.db").is_file()
    p = _run(tmp_path, "users", "create", "dave", KERNELRANK_DATA_DIR=str(data))  # exists now: no --init needed
    assert p.returncode == 0, p.stderr
    p = _run(tmp_path, "users", "passwd", "dave", "--clear", KERNELRANK_DATA_DIR=str(data))
    assert p.returncode == 0 and "password of dave removed" in p.stderr


def test_a_file_that_is_no_kernelrank_database_is_refused_too(tmp_path: Path) -> None:
    import sqlite3

    data = tmp_path / "data"
    data.mkdir()
    sqlite3.connect(data / "kernelrank.db").close()  # an empty SQLite file: no KernelRank tables
    p = _run(tmp_path, "users", "create", "carol", KERNELRANK_DATA_DIR=str(data))
    assert p.returncode == 3 and "no KernelRank database" in p.stderr
