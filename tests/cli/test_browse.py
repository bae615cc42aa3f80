"""The CLI a kernel author expects: ``--version``, ``submissions list | show | wait``,
``problems list | show`` from the server (``--local`` for the folders here), and output that fits
narrow terminals (80 and 60 columns: a vertical layout, never a cut number). The real console
script against the real API of ``tests/cli/test_client.py``'s service (the ``double`` problem on
the server, the repository's problems in the local folders).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from kernelrank import __version__
from tests.cli.test_client import Service, _free_port, service  # noqa: F401 - the module-scoped service
from tests.conftest import SUBMISSIONS

#: A correct ``double`` kernel whose first call takes half a second (a job still running after 1 s).
SLOW_OK = ("import time\n_slept = False\n\n\ndef custom_kernel(data):\n    global _slept\n    if not _slept:\n"
           "        _slept = True\n        time.sleep(0.5)\n    return data[0] + data[0]\n")


def _as(service: Service, user: str) -> list[str]:
    return ["--server", service.url, "--token", service.tokens[user]]


def _fits(text: str, width: int) -> None:
    """Every line within ``width`` columns and nothing cut short with an ellipsis."""
    assert "…" not in text, text
    assert max(len(line) for line in text.splitlines()) <= width, text


@pytest.fixture(scope="module")
def ranked_sub(service: Service) -> int:
    """carol's ranked leaderboard submission (fixed benchmark timings: 250 µs a case, 2x)."""
    p = service.run("submit", "double", str(SUBMISSIONS / "double_ok.py"), "--mode", "leaderboard", "--json",
                    *_as(service, "alice"))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["id"]


def test_version() -> None:
    from tests.cli.test_client import KERNELRANK

    p = subprocess.run([KERNELRANK, "--version"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith(f"kernelrank {__version__} (Python 3.")


# -- problems ----------------------------------------------------------------------------------


def test_problems_list_and_show_read_the_server_by_default(service: Service) -> None:
    p = service.run("problems", "list", "--server", service.url)
    assert p.returncode == 0, p.stderr
    assert f"Problems on {service.url}" in p.stdout and "double" in p.stdout and "softmax" not in p.stdout
    listed = json.loads(service.run("problems", "list", "--server", service.url, "--json").stdout)
    assert [x["name"] for x in listed] == ["double"] and listed[0]["benchmarks"] == {"cpu": 2, "cuda": 1}

    p = service.run("problems", "show", "double", "--server", service.url)
    assert p.returncode == 0, p.stderr
    assert "Double a vector (double, revision" in p.stdout and "data[0]" in p.stdout and "Tolerances" in p.stdout
    shown = json.loads(service.run("problems", "show", "double", "--server", service.url, "--json").stdout)
    assert shown["name"] == "double" and shown["contract"]["output"]["dtype"] == "float32"

    p = service.run("problems", "show", "softmax", "--server", service.url)
    assert p.returncode == 2 and "unknown problem 'softmax'" in p.stderr


def test_problems_local_reads_the_folders_here(service: Service) -> None:
    p = service.run("problems", "list", "--local")
    assert p.returncode == 0, p.stderr
    assert "softmax" in p.stdout and "gemm" in p.stdout and "double" not in p.stdout
    p = service.run("problems", "show", "softmax", "--local")
    assert p.returncode == 0 and "Row-wise softmax (softmax, revision" in p.stdout
    assert json.loads(service.run("problems", "show", "softmax", "--local", "--json").stdout)["name"] == "softmax"


def test_problems_list_without_a_server_says_so_and_names_local() -> None:
    from tests.cli.test_client import KERNELRANK

    url = f"http://127.0.0.1:{_free_port()}"
    p = subprocess.run([KERNELRANK, "problems", "list", "--server", url], capture_output=True, text=True, timeout=60)
    assert p.returncode == 3 and f"cannot reach the server at {url}" in p.stderr and "--local" in p.stderr


# -- submissions -------------------------------------------------------------------------------


def test_submissions_list_filters_and_show(service: Service, ranked_sub: int) -> None:
    p = service.run("submissions", "list", *_as(service, "alice"))
    assert p.returncode == 0, p.stderr
    row = next(line for line in p.stdout.splitlines() if re.match(rf"│\s*{ranked_sub}\s*│", line))
    cells = [c.strip() for c in row.split("│")[1:-1]]
    assert cells[:7] == [str(ranked_sub), "double", "cpu", "leaderboard", "passed", "250 µs", "2.00×"]

    listed = json.loads(service.run("submissions", "list", "--status", "passed", "--json", *_as(service, "alice")).stdout)
    assert ranked_sub in [s["id"] for s in listed] and all(s["status"] == "passed" for s in listed)
    p = service.run("submissions", "list", "--problem", "nope", *_as(service, "alice"))
    assert p.returncode == 0 and "no submissions matching problem=nope" in p.stdout
    p = service.run("submissions", "list", "--status", "great", *_as(service, "alice"))
    assert p.returncode == 2 and "unknown status 'great'" in p.stderr
    p = service.run("submissions", "list", "--server", service.url)  # no token: says how to log in
    assert p.returncode == 2 and "kernelrank login" in p.stderr

    p = service.run("submissions", "show", str(ranked_sub), *_as(service, "alice"))
    assert p.returncode == 0, p.stderr
    assert "public run: passed" in p.stdout and f"submission #{ranked_sub}: passed" in p.stdout
    assert "ranked with score 250 µs" in p.stdout and "secret-seed run: passed" in p.stdout
    assert json.loads(service.run("submissions", "show", str(ranked_sub), "--json", *_as(service, "alice")).stdout)[
        "id"] == ranked_sub
    p = service.run("submissions", "show", "999999", *_as(service, "alice"))
    assert p.returncode == 2 and "404" in p.stderr


def test_submissions_wait_reattaches_with_the_submit_progress_view(service: Service, tmp_path: Path) -> None:
    kernel = tmp_path / "slow_ok.py"
    kernel.write_text(SLOW_OK)
    p = service.run("submit", "double", str(kernel), "--mode", "test", "--timeout", "1", *_as(service, "bob"))
    assert p.returncode == 1 and "gave up after 1 s" in p.stderr, p.stderr
    sid = int(re.search(r"submission #(\d+)", p.stderr).group(1))

    p = service.run("submissions", "wait", str(sid), *_as(service, "bob"))
    assert p.returncode == 0, p.stderr
    assert f"waiting for submission #{sid}" in p.stderr
    assert "public run: passed" in p.stderr and "verdict" not in p.stderr  # submit's progress lines
    assert "test case 1 (N=1000)" in p.stderr
    assert "double · test cases · cpu" in p.stdout and f"submission #{sid}: passed" in p.stdout

    waited = json.loads(service.run("submissions", "wait", str(sid), "--json", *_as(service, "bob")).stdout)
    assert waited["id"] == sid and waited["status"] == "passed"


def test_submissions_wait_gives_up_after_its_timeout(service: Service) -> None:
    p = service.run("submit", "double", str(SUBMISSIONS / "hang.py"), "--mode", "test", "--timeout", "1",
                    *_as(service, "bob"))
    sid = int(re.search(r"submission #(\d+)", p.stderr).group(1))
    p = service.run("submissions", "wait", str(sid), "--timeout", "1", *_as(service, "bob"))
    assert p.returncode == 1 and "gave up after 1 s" in p.stderr and f"submissions wait {sid}" in p.stderr


# -- narrow terminals --------------------------------------------------------------------------


@pytest.mark.parametrize("width", [80, 60])
def test_output_fits_narrow_terminals_without_cutting_numbers(service: Service, ranked_sub: int, width: int) -> None:
    env = service.env(COLUMNS=str(width))
    p = service.run("submissions", "show", str(ranked_sub), *_as(service, "alice"), env=env)
    assert p.returncode == 0, p.stderr
    _fits(p.stdout, width)
    # the benchmark table has 13 columns: too wide, so one block per case, every figure whole
    assert "── 0 · N=100000" in p.stdout and "── 1 · N=400000" in p.stdout
    for key, figure in (("mean", "250 µs"), ("std", "1.00 µs"), ("min", "248 µs"), ("max", "253 µs"),
                        (r"speedup \(95%\)", "2.00×")):
        assert len(re.findall(rf"^{key} +{figure} *$", p.stdout, re.M)) == 2, (key, p.stdout)

    p = service.run("leaderboard", "double", "--server", service.url, env=env)
    assert p.returncode == 0, p.stderr
    _fits(p.stdout, width)
    assert "250 µs" in p.stdout and "2.00×" in p.stdout

    p = service.run("submissions", "list", *_as(service, "alice"), env=env)
    assert p.returncode == 0, p.stderr
    _fits(p.stdout, width)
    assert "250 µs" in p.stdout and str(ranked_sub) in p.stdout

    from kernelrank.problems import load_all

    p = service.run("problems", "list", "--local", env=env)
    _fits(p.stdout, width)
    for problem in load_all():
        assert problem.name in p.stdout and problem.revision[:12] in p.stdout
