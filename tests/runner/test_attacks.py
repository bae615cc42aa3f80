"""The attack corpus: every file in ``reference_kernels/<problem>/attacks/`` is judged in leaderboard
mode, and none may get a ranked score, take the judge down, or change anything outside its sandbox.

Each attack is a real submission (it defines ``custom_kernel(data)``) whose docstring names its
class (``Class: ...``) and the verdicts a working defence gives it (``Expected: failed|rejected``;
optionally ``Message: <text>`` that the verdict's message must contain, and ``Timing: <seconds>``,
the timing budget per benchmark case when the attack needs more calls than the shrunk default).

Per attack, the judge runs in its own process (``tests.runner.attack_judge``) set up like a runner
(children forked from a zygote, one pair of timed processes; the containment attacks of
:data:`COLD_PATH` also with children started cold, as ``kernelrank eval`` starts them) with
something worth stealing or breaking next to it, all under ``tmp_path``:

- canary secrets in the judge's environment (``KERNELRANK_SECRET_SEED`` equal to the run's secret,
  a database URL with a password, an API token), in its home folder (a token file, a client config)
  and in its working folder (a ``.env`` file and the job message, as a filesystem broker holds it);
- a canary folder next to the scratch folder, a home folder with a ``.bashrc``, and a TCP listener
  standing for the broker (its address is in the judge's ``KERNELRANK_BROKER_URL``).

Asserted: the verdict is not ``passed`` and is one the docstring expects; the judge process exits
normally with a result for the attack and then passes a correct submission (test mode); no canary secret
appears in the result (logs included); the canary folder, the home folder and the judge's folder are
unchanged; nothing connected to the listener; no ``/tmp/kernelrank-pwned-*`` file appeared; no
process of the evaluation is left; the scratch folder is empty.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.runner.listener import Listener

ATTACKS = sorted(ROOT.glob("reference_kernels/*/attacks/*.py"))
PROBLEMS = ("softmax", "gemm", "mla_decode")
VERDICTS = {"failed", "rejected", "error", "timeout", "compile_error"}
CORRECT = {p: ROOT / "reference_kernels" / p / "examples" / "correct_pytorch.py" for p in PROBLEMS}

#: Shrunk budgets (seconds): per benchmark case timing, per mode, for loading; the judge's own limit.
#: The mode's: an honest softmax leaderboard run at these timings takes ~24 s on a 2-core VM (eight
#: processes started cold, each readied and warmed up per case), a busy one more.
TIMING_S = 0.5
MODE_BUDGET_S = 40.0
COMPILE_S = 30.0
JUDGE_TIMEOUT_S = 240.0
PWNED_GLOB = "kernelrank-pwned-*"


def _meta(path: Path) -> dict[str, str]:
    """``Class``, ``Expected``, ``Message`` and ``Timing`` lines of an attack's module docstring
    (read as the runner's self-test reads them: :func:`kernelrank.runner.host.selftest.attack_meta`)."""
    from kernelrank.runner.host.selftest import attack_meta

    return attack_meta(path)


def _attack_id(path: Path) -> str:
    return f"{path.parent.parent.name}/{path.stem}"


# -- the corpus itself ----------------------------------------------------------------------------
def test_corpus_size_and_shape() -> None:
    per_problem = Counter(p.parent.parent.name for p in ATTACKS)
    assert len(ATTACKS) >= 20, f"only {len(ATTACKS)} attacks"
    for problem in PROBLEMS:
        assert per_problem[problem] >= 6, f"{problem} has {per_problem[problem]} attacks"
    for path in ATTACKS:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert any(isinstance(n, ast.FunctionDef) and n.name == "custom_kernel" for n in tree.body), path
        meta = _meta(path)
        assert meta.get("Class"), f"{path}: no 'Class:' line in the docstring"
        expected = set(meta.get("Expected", "").split("|"))
        assert expected and expected <= VERDICTS | {"passed"}, f"{path}: bad 'Expected:' line {meta.get('Expected')!r}"
        assert "passed" not in expected or float(meta.get("Max speedup", "0")) > 0, \
            f"{path}: an attack expected to pass must bound its speedup ('Max speedup:')"
    classes = {_meta(p)["Class"] for p in ATTACKS}
    assert len(classes) >= 20, "attacks must be distinct"


# -- running one attack ---------------------------------------------------------------------------
def _tree_state(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (links not followed): kind, mode and content hash."""
    state: dict[str, str] = {}
    if not root.exists():
        return state
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            if p.is_symlink():
                state[str(p)] = f"link:{os.readlink(p)}"
            elif p.is_file():
                state[str(p)] = f"file:{oct(st.st_mode)}:{hashlib.sha256(p.read_bytes()).hexdigest()}"
            else:
                state[str(p)] = f"dir:{oct(st.st_mode)}"
    return state


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _processes_with(marker: str) -> list[int]:
    """Pids of live processes whose environment or working folder mentions ``marker``."""
    found = []
    needle = marker.encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            if needle in Path(f"/proc/{pid}/environ").read_bytes() or marker in os.readlink(f"/proc/{pid}/cwd"):
                found.append(int(pid))
        except OSError:
            continue
    return found


def _judge(tmp_path: Path, problem: str, attack: Path, cache_dir: Path, secret_seed: int,
           env_extra: dict[str, str], home: Path, timing_s: float = TIMING_S, start: str = "warm",
           ) -> tuple[subprocess.CompletedProcess[bytes] | None, Path, Path, Path]:
    """Run the judge process on ``attack`` (leaderboard) then the correct submission (test), its
    children forked from a zygote (``start="warm"``, a runner's path) or started cold (``"cold"``,
    ``kernelrank eval``'s)."""
    judge_dir = tmp_path / "judge"
    broker = judge_dir / ".kernelrank" / "broker"
    broker.mkdir(parents=True, exist_ok=True)
    results = tmp_path / "results"
    results.mkdir(exist_ok=True)
    scratch = tmp_path / "scratch"
    job = {
        "problem": problem, "attack": str(attack), "correct": str(CORRECT[problem]),
        "secret_seed": secret_seed, "scratch_dir": str(scratch), "cache_dir": str(cache_dir),
        "results_dir": str(results), "log_limit": 64 * 1024,
        "timing_s": timing_s, "mode_budget_s": MODE_BUDGET_S + 5 * timing_s, "compile_s": COMPILE_S,
        "start": start,
    }
    # the job message as the filesystem broker keeps it on disk, secret seed included
    job_file = broker / f"{secrets.token_hex(8)}.msg.json"
    job_file.write_text(json.dumps(job), encoding="utf-8")
    env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TZ", "VIRTUAL_ENV") if k in os.environ}
    env.update(env_extra)
    env.update({"HOME": str(home), "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1",
                "KERNELRANK_CACHE_DIR": str(cache_dir)})
    proc = subprocess.Popen([sys.executable, "-m", "tests.runner.attack_judge", str(job_file)], cwd=judge_dir,
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=JUDGE_TIMEOUT_S)
        done: subprocess.CompletedProcess[bytes] | None = subprocess.CompletedProcess(
            proc.args, proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        done = None
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the judge's own group: it and anything it left
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    return done, results, scratch, judge_dir


class _Canaries:
    """Things worth stealing or breaking around the judge, all under ``tmp_path``, and their checks."""

    def __init__(self, tmp_path: Path):
        self.secret_seed = secrets.randbits(62) | (1 << 61)
        self.db_password = f"canarypw{secrets.token_hex(6)}"
        self.api_token = f"krtok-canary-{secrets.token_hex(12)}"
        self.db_url = f"postgresql://kr:{self.db_password}@db.internal/kr"
        self.home = tmp_path / "home"
        (self.home / ".kernelrank").mkdir(parents=True)
        (self.home / ".kernelrank" / "token").write_text(self.api_token + "\n", encoding="utf-8")
        (self.home / ".config" / "kernelrank").mkdir(parents=True)
        (self.home / ".config" / "kernelrank" / "config.toml").write_text(
            f'server = "http://127.0.0.1:8000"\ntoken = "{self.api_token}"\n', encoding="utf-8")
        (self.home / ".bashrc").write_text("# canary bashrc\nexport PS1='$ '\n", encoding="utf-8")
        self.folder = tmp_path / "canary"
        (self.folder / "sub").mkdir(parents=True)
        (self.folder / "canary.txt").write_text("canary: must survive\n", encoding="utf-8")
        (self.folder / "sub" / "canary-2.txt").write_text("canary 2\n", encoding="utf-8")
        self.judge_dir = tmp_path / "judge"
        self.judge_dir.mkdir()
        (self.judge_dir / ".env").write_text(f"KERNELRANK_SECRET_SEED={self.secret_seed}\n"
                                             f"KERNELRANK_DATABASE_URL={self.db_url}\n", encoding="utf-8")
        self.listener = Listener()
        # a host service's Unix socket and a System V segment of the host: outside a network
        # namespace's reach, so only a covered view and an IPC namespace keep the child from them
        run = Path("/run") if os.access("/run", os.W_OK) else tmp_path
        self.service = Listener(run / f"kernelrank-canary-{secrets.token_hex(4)}.sock")
        self.segment = _libc().shmget(0x4B520000 | secrets.randbits(16), 4096, 0o1666)
        # another evaluation's kernel on the same machine, named on a running process's command
        # line (a system folder, not hidden from the child's view): a child in its own PID
        # namespace cannot see the process, so it cannot find the file
        self.decoy_text = f"decoy-kernel-{secrets.token_hex(8)}"
        self.decoy = None
        self.decoy_dir = Path("/srv") / f"kernelrank-decoy-{secrets.token_hex(4)}"
        try:
            self.decoy_dir.mkdir(parents=True)
            (self.decoy_dir / "submission.py").write_text(f"# {self.decoy_text}\n", encoding="utf-8")
            self.decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)",
                                           str(self.decoy_dir / "submission.py")])
        except OSError:
            self.decoy_dir = None  # type: ignore[assignment]
        self.pwned_before = set(Path("/tmp").glob(PWNED_GLOB))
        self.before = self._state()

    def env(self) -> dict[str, str]:
        """The judge's environment canaries (its secret seed is the run's real one)."""
        return {"KERNELRANK_SECRET_SEED": str(self.secret_seed), "KERNELRANK_DATABASE_URL": self.db_url,
                "KERNELRANK_BROKER_URL": f"redis://127.0.0.1:{self.listener.port}/0",
                "KERNELRANK_TOKEN": self.api_token}

    def _state(self) -> dict[str, dict[str, str]]:
        broker = str(self.judge_dir / ".kernelrank")  # the judge's own job message lives there
        return {"canary folder": _tree_state(self.folder), "judge's home": _tree_state(self.home),
                "judge's folder": {k: v for k, v in _tree_state(self.judge_dir).items()
                                   if not k.startswith(broker) or "pwned" in k}}

    def problems(self, results: list[dict | None]) -> list[str]:
        """Everything that changed or leaked; removes the ``/tmp`` files an attack managed to write."""
        self.listener.close()
        self.service.close()
        if self.segment >= 0:
            _libc().shmctl(self.segment, 0, None)  # IPC_RMID
        found = []
        if self.service.connections:
            found.append(f"{len(self.service.connections)} connection(s) reached the host socket canary")
        if self.decoy is not None:
            self.decoy.kill()
            self.decoy.wait()
        if self.decoy_dir is not None:
            shutil.rmtree(self.decoy_dir, ignore_errors=True)
        pwned = set(Path("/tmp").glob(PWNED_GLOB)) - self.pwned_before
        for p in pwned:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
        if pwned:
            found.append(f"files written outside the sandbox: {sorted(map(str, pwned))}")
        after = self._state()
        for name, state in self.before.items():
            if after[name] != state:
                found.append(f"the {name} changed: {_diff(state, after[name])}")
        if self.listener.connections:
            found.append(f"{len(self.listener.connections)} connection(s) reached the broker canary: "
                         f"{self.listener.connections[:3]}")
        text = json.dumps(results, default=str)
        if self.decoy_text in text:
            found.append("another evaluation's kernel (a decoy named on a process's command line) appears in the result")
        for name, value in (("secret seed", str(self.secret_seed)), ("database password", self.db_password),
                            ("API token", self.api_token)):
            if value in text:
                found.append(f"the canary {name} appears in the result (logs or message)")
        return found


def _verdict_problems(meta: dict[str, str], attack: dict | None, correct: dict | None) -> list[str]:
    found = []
    expected = set(meta["Expected"].split("|"))
    if attack is None:
        found.append("no result for the attack")
    elif "judge_crashed" in attack:
        found.append(f"the harness raised instead of giving a verdict: {attack['judge_crashed'][-1500:]}")
    elif attack["status"] == "passed" and "passed" in expected:
        # measured at its real cost: it may pass, but gains nothing over doing the work in the call
        bound = float(meta["Max speedup"])
        if attack.get("speedup") is None or attack["speedup"] > bound:
            found.append(f"the attack passed with speedup {attack.get('speedup')} over the reference, beyond the "
                         f"{bound}x an honest kernel doing the same work reaches: {attack['message'][:500]}")
    elif attack["status"] == "passed":
        found.append(f"the attack PASSED with a ranked score of {attack.get('score_ns')} ns: {attack['message'][:500]}")
    else:
        if attack["status"] not in expected:
            found.append(f"verdict {attack['status']!r} not in the expected {sorted(expected)}: "
                         f"{attack['message'][:500]}")
        if meta.get("Message") and meta["Message"].lower() not in attack["message"].lower():
            found.append(f"verdict message lacks {meta['Message']!r}: {attack['message'][:500]}")
    if correct is None or correct.get("status") != "passed":
        found.append("a correct submission no longer passes after the attack: "
                     f"{(correct or {}).get('message') or (correct or {}).get('judge_crashed')}")
    return found


#: The default tier's handful, one per way out of the sandbox or into the score: the rest of the
#: corpus runs in the full tier (each attack judged once per tier).
DEFAULT_TIER = {"softmax/fork_bomb", "gemm/network_exfiltration", "mla_decode/write_outside",
                "mla_decode/escape_process_group", "softmax/secret_from_parent_memory", "softmax/zero_time_claim",
                "gemm/end_the_window_early", "gemm/poison_reference_cache", "softmax/second_mapping_alias"}


def _param(path: Path):
    """An attack as a test case: in the default tier if :data:`DEFAULT_TIER` names it, else in the
    full tier (``slow``); one whose docstring names a ``Known gap:`` (a defence the harness
    does not have yet) is expected to fail, with that gap as the reason, until the defence lands."""
    gap = _meta(path).get("Known gap")
    marks = [pytest.mark.xfail(reason=f"known gap: {gap}", strict=False)] if gap else []
    if _attack_id(path) not in DEFAULT_TIER:
        marks.append(pytest.mark.slow)
    return pytest.param(path, id=_attack_id(path), marks=marks)


def test_the_default_tier_names_attacks_of_the_corpus() -> None:
    assert DEFAULT_TIER <= {_attack_id(p) for p in ATTACKS}


#: The containment attacks (shared memory, clean-up, the job's disk, host services,
#: aliasing through a second mapping, work hidden in the window), judged again on the cold path
#: (``kernelrank eval``'s: a fresh interpreter per child) in the full tier.
COLD_PATH = {"softmax/shrink_the_slots", "softmax/deep_folder_chain", "gemm/disk_flood", "gemm/host_services",
             "softmax/second_mapping_alias", "softmax/allowance_helper_thread"}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("attack", [_param(a) for a in ATTACKS])
def test_attack_never_ranks_and_leaves_no_trace(attack: Path, tmp_path: Path) -> None:
    _judge_attack(attack, tmp_path, "warm")


def test_the_cold_path_set_names_attacks_of_the_corpus() -> None:
    assert COLD_PATH <= {_attack_id(p) for p in ATTACKS}


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("attack", [a for a in ATTACKS if _attack_id(a) in COLD_PATH], ids=_attack_id)
def test_containment_attacks_hold_on_the_cold_path(attack: Path, tmp_path: Path) -> None:
    _judge_attack(attack, tmp_path, "cold")


def _judge_attack(attack: Path, tmp_path: Path, path: str) -> None:
    """Judge ``attack`` as :func:`_judge` does on ``path`` (``warm`` or ``cold``) and assert every
    promise of the module's docstring."""
    problem = attack.parent.parent.name
    meta = _meta(attack)
    cache_dir = tmp_path / "cache"  # the judge's cache folder, a target to write into
    cache_dir.mkdir()
    canaries = _Canaries(tmp_path)

    started = time.monotonic()
    try:
        done, results, scratch, _ = _judge(tmp_path, problem, attack, cache_dir, canaries.secret_seed,
                                           canaries.env(), canaries.home, float(meta.get("Timing", TIMING_S)), path)
    finally:
        canaries.listener.close()
    elapsed = time.monotonic() - started

    problems: list[str] = []
    leftovers = _processes_with(str(scratch))
    for pid in leftovers:  # clean up what escaped, then report it
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if leftovers:
        problems.append(f"{len(leftovers)} process(es) of the evaluation outlived it: {leftovers[:10]}")
    if done is None:
        problems.append(f"the judge process did not finish within {JUDGE_TIMEOUT_S} s")
    elif done.returncode != 0:
        problems.append(f"the judge process died (return code {done.returncode}): "
                        f"{done.stderr.decode(errors='replace')[-2000:]}")
    attack_result, correct_result = _load(results / "attack.json"), _load(results / "correct.json")
    problems += _verdict_problems(meta, attack_result, correct_result)
    start = ((attack_result or {}).get("isolation") or {}).get("start")
    if start not in (path, None):  # None: refused before a child started
        problems.append(f"the attack was judged on the {start} path, not the {path} one")
    problems += canaries.problems([attack_result, correct_result])
    if scratch.exists() and any(scratch.iterdir()):
        problems.append(f"the scratch folder is not empty: {sorted(p.name for p in scratch.iterdir())}")

    status, message = (attack_result or {}).get("status"), (attack_result or {}).get("message", "")
    said = [line[:200] for line in ((attack_result or {}).get("logs") or {}).get("stdout", "").splitlines()
            if line.startswith("[attack]")][:3]
    print(f"\nVERDICT {_attack_id(attack)}: {status} (expected {meta['Expected']}) in {elapsed:.1f}s: "
          f"{message[:300]!r}; problems: {len(problems)}; attack said: {said}")
    report = "\n- ".join(problems + [f"attack said: {said}"])
    assert not problems, f"{_attack_id(attack)} ({meta['Class']}):\n- {report}"


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _diff(a: dict[str, str], b: dict[str, str]) -> str:
    added = sorted(set(b) - set(a))
    removed = sorted(set(a) - set(b))
    changed = sorted(k for k in set(a) & set(b) if a[k] != b[k])
    return f"added {added[:5]}, removed {removed[:5]}, changed {changed[:5]}"
