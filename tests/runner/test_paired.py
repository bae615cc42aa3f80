"""The submission and the reference timed side by side, in one run, on the same fresh inputs
(``harness._Evaluation._rounds``), on the test-only problem ``double`` (small budgets).

The default tier keeps the pairing, checking and scoring; the statistics' finer rules (derived
sets, calibration, noise, warm-up, several pairs of processes, a burner, budgets) are the full
tier's (``slow``)."""

from __future__ import annotations

import collections
import math
import os
from dataclasses import replace

import pytest

from kernelrank.runner import stats
from kernelrank.runner.judge import harness, judging
from kernelrank.runner.judge.harness import evaluate
from kernelrank.runner.judge.inputsets import POOL_SETS
from kernelrank.runner.judge.pairs import submission_first
from kernelrank.runner.results import EvalResult
from kernelrank.vocab import Verdict
from kernelrank.runner.judge.timed import MAX_SETS_PER_REQUEST, REQUEST_SECONDS, TIMED_SHARE_GUESS
from tests.conftest import submission


def _bench(r: EvalResult) -> list:
    return [c for c in r.cases if c.kind == "benchmark"]


def _timed_as(problem, **update):
    """``problem``'s spec with ``update`` applied to every device's ``timing``, its revision kept."""
    timing = {d: t.model_copy(update=update) for d, t in problem.definition.timing.items()}
    return problem.spec().__class__(problem.definition.model_copy(update={"timing": timing}),
                                    problem.spec().reference_source, problem.revision)


def test_both_sides_are_timed_in_one_run_on_the_same_fresh_inputs(double, options, monkeypatch) -> None:
    """Every prepared input set (one seed each, none used twice in a case) is placed for the
    submission and the reference one right after the other, the same sets in the same order (a
    request of one call per set: several on the CPU, ``REQUEST_SECONDS``), and the pairs
    alternate which side goes first; every call's output of the submission is checked and every
    one of the reference read alike (reading only one side's outputs warmed its next outputs'
    pages), each pair's right after its two requests."""
    requests: list[tuple[str, tuple[int, ...], str]] = []  # (side, ids of its sets, the case), in order
    seeds: list[tuple[int, int]] = []
    batches: list[tuple[int, int]] = []  # (N of the case, the case's requests made before the batch)
    checks: list[tuple[str, int]] = []  # (checked or read, requests made before it)
    timed, inputs, prepare = harness._Evaluation._timed_request, harness._Evaluation._inputs, harness._Evaluation._prepare_batch
    quick, through = harness._Evaluation._quick_check, harness._Evaluation._read_through

    def recording_request(self, side, other, sets, deadline):
        requests.append((side.name, tuple(id(s.data) for s in sets), self._where))
        return timed(self, side, other, sets, deadline)

    def recording_check(self, child, reply, index, expected):
        passed = quick(self, child, reply, index, expected)
        assert passed  # an honest kernel's output passes the quick rule, read in pieces
        checks.append(("checked", len(requests)))
        return passed

    def recording_read(child, reply, index):
        checks.append(("read", len(requests)))
        return through(child, reply, index)

    def recording_inputs(self, case, seed):
        seeds.append((case.params["N"], seed))
        return inputs(self, case, seed)

    def recording_batch(self, case, seeds, paired=None):
        assert paired is None or not paired.pool  # the reference of ``double`` has no derive_input: every set is drawn
        batches.append((case.params["N"], sum(1 for *_x, where in requests if where == self._where)))
        return prepare(self, case, seeds, paired)

    monkeypatch.setattr(harness._Evaluation, "_timed_request", recording_request)
    monkeypatch.setattr(harness._Evaluation, "_quick_check", recording_check)
    monkeypatch.setattr(harness._Evaluation, "_read_through", staticmethod(recording_read))
    monkeypatch.setattr(harness._Evaluation, "_inputs", recording_inputs)
    monkeypatch.setattr(harness._Evaluation, "_prepare_batch", recording_batch)
    events: list[dict] = []
    r = evaluate(double.spec(), submission("double_ok.py"), "leaderboard", "cpu", options, events.append)
    assert r.status is Verdict.passed, r.message
    pairs = {e["case"]: e["pairs"] for e in events if e["event"] == "pairs"}
    # the judged samples a score's bundle carries give back each case's interval and the run's
    samples = {e["case"]: e for e in events if e["event"] == "samples"}
    intervals, means = [], []
    for c in _bench(r):
        s = samples[c.index]
        assert len(s["submission_ns"]) == len(s["reference_ns"]) == c.pairing["pairs"]
        interval = stats.paired_speedup(s["reference_ns"], s["submission_ns"], groups=s["groups"])
        assert (interval.estimate, [interval.low, interval.high]) == (c.speedup, c.speedup_ci)
        intervals.append(interval)
        if s["groups"] is not None:
            means.append(stats.group_means(s["reference_ns"], s["submission_ns"], s["groups"]))
    run = stats.combine(intervals, means or None)
    assert (run.estimate, [run.low, run.high]) == (r.speedup, r.speedup_ci)
    total = 0
    for c in _bench(r):  # the cases are timed in rounds (harness._Evaluation._rounds): each case's own requests
        mine = [s for n, s in seeds if n == c.spec["N"]]
        assert len(mine) == len(set(mine)), "an input set was generated twice from one seed"
        recorded = pairs[c.index]  # every pair timed, the warm-up pairs marked (field 10: 0)
        counted = [p for p in recorded if p[9]]
        assert len(counted) == c.pairing["pairs"] and len(recorded) - len(counted) == c.pairing["warm_up_pairs"]
        # each pair of processes' first timed request is a warm-up (faults of a new request shape)
        assert c.pairing["warm_up_pairs"] >= c.pairing["processes"]
        calls = sum(p[7] for p in counted)  # calls per request, the same on both sides
        assert calls == c.timing["runs"] == c.ref_timing["runs"]
        assert max(p[7] for p in recorded) == c.pairing["calls_per_pair"] > 1  # ~30 µs calls: many per request
        # the order alternates within a batch, and the first pairs of successive batches alternate
        starts = [n // 2 for m, n in batches if m == c.spec["N"]]  # the batch's first pair
        assert starts[0] == 0 and len(starts) > 1, starts
        expected = [int(submission_first(b, i - start))
                    for b, (start, end) in enumerate(zip(starts, starts[1:] + [len(recorded)]))
                    for i in range(start, end)]
        assert [p[0] for p in recorded] == expected
        assert [expected[s] for s in starts] == [1 - b % 2 for b in range(len(starts))]
        # every timed output, counted or not, and each process's first warm-up one
        assert c.checked == sum(p[7] for p in recorded) + c.pairing["processes"]
        total += len(recorded)
    assert len(requests) == 2 * total
    timed_calls = sum(p[7] for c in _bench(r) for p in pairs[c.index])
    per_side = collections.Counter(what for what, _ in checks)
    # both sides, every call; and each process's first output (its warm-up's), both sides: quick rule too
    warm_ups = sum(2 * c.pairing["processes"] for c in _bench(r))
    assert per_side == {"checked": timed_calls + warm_ups, "read": timed_calls}, per_side
    assert all(made % 2 == 0 for _, made in checks)  # each pair's outputs checked after both its requests
    for (a, sets_a, _a), (b, sets_b, _b) in zip(requests[::2], requests[1::2]):
        assert {a, b} == {"submission", "reference"} and sets_a == sets_b  # a pair: the same sets, both sides


#: ``derive_input`` for the test-only problem ``double``, appended to its reference's source: a
#: rotation of two pooled sets, as softmax's (each call recorded in the judge's module, and each
#: call of its reference)
_DERIVING = '''

import math as _math
import random as _random

DERIVED = []
GENERATED = []
REFERENCED = []
_generate = generate_input
_ref_kernel = ref_kernel


def generate_input(**params):
    GENERATED.append(params["seed"])
    return _generate(**params)


def ref_kernel(data):
    REFERENCED.append(data[0].numel())
    return _ref_kernel(data)


def derive_input(first, second, *, seed):
    DERIVED.append((seed, first[0].data_ptr(), second[0].data_ptr()))
    rng = _random.Random(seed)  # as softmax's: an angle and a shift of their own per seed
    t, k = rng.uniform(0, 2 * _math.pi), rng.randrange(first[0].numel())
    return (first[0] * _math.cos(t) + second[0].roll(k) * _math.sin(t),)
'''


@pytest.mark.slow
def test_timed_sets_are_derived_from_a_pool_when_the_reference_says_how(double, options, monkeypatch) -> None:
    """A reference with ``derive_input``: each timed case draws ``POOL_SETS`` sets with
    ``generate_input`` (its warm-up's first), and every timed set is derived from two different
    ones of them, by its own secret seed, with values no other set of the run had; the
    submission is checked on every one of them against the reference process's output on the
    same set (the judge computes the reference itself only for the tests and each case's first
    set), and a kernel that replays an earlier output fails. Without ``derive_input`` (the other
    tests of this module) every set is drawn."""
    spec = double.spec()
    spec = type(spec)(spec.definition, spec.reference_source + _DERIVING, spec.revision)
    modules, derived = [], []
    draw, derive = harness._Evaluation._draw_pool, harness._Evaluation._derive

    def recording_draw(self, case, first):
        modules.append(self.reference)
        return draw(self, case, first)

    def recording_derive(self, pool, seed):
        data = derive(self, pool, seed)
        derived.append((data[0].numel(), data[0].clone()))
        return data

    monkeypatch.setattr(harness._Evaluation, "_draw_pool", recording_draw)
    monkeypatch.setattr(harness._Evaluation, "_derive", recording_derive)
    r = evaluate(spec, submission("double_ok.py"), "leaderboard", "cpu", options)
    assert r.status is Verdict.passed, r.message
    (module,) = set(modules)
    bench = _bench(r)
    assert len(modules) == len(bench)  # one pool per timed case
    tests = len(double.definition.tests)
    # generate_input: each test case, then per timed case its warm-up set and the rest of its pool
    assert len(module.GENERATED) == tests + len(bench) * POOL_SETS
    assert len(set(module.GENERATED[tests:])) == len(module.GENERATED) - tests
    assert len(derived) == len(module.DERIVED) == sum(c.checked for c in bench) - sum(c.pairing["processes"] for c in bench)
    # the judge's own reference: each test case and each timed case's first set, no derived set
    assert module.REFERENCED == [c.params["N"] for c in double.definition.tests] + [c.spec["N"] for c in bench]
    assert all(c.pairing["expected_thread_s"] == 0 for c in bench)
    assert all(a != b for _seed, a, b in module.DERIVED)  # two different sets of the pool
    assert len({seed for seed, *_ in module.DERIVED}) == len(module.DERIVED)
    for c in bench:
        mine = [x for n, x in derived if n == c.spec["N"]]
        assert len({x.numpy().tobytes() for x in mine}) == len(mine)  # no set seen twice
        assert len(mine) >= c.timing["runs"]
    replay = ("last = None\n\n\ndef custom_kernel(data):\n    global last\n"
              "    if last is None or last.shape != data[0].shape:\n        last = data[0] * 2\n    return last.clone()\n")
    r = evaluate(spec, replay, "benchmark", "cpu", options)
    assert r.status is Verdict.failed and "output of timed call" in r.message, r.message
    # a wrong output is judged against the judge's own reference, with its figures
    failed = next(c for c in r.cases if not c.passed)
    assert failed.max_abs_error is not None and failed.max_abs_error > 0 and failed.mismatches


def _reference_process_that(spec, action: str, after: int, revision: str, prefix: str = ""):
    """``spec`` with a reference whose processes (in the sandbox: the judge's own reference runs
    outside it), on a benchmark case's sizes, do ``action`` (a line of Python; ``out`` is the right
    output, returned after it) on each call after their first ``after``; ``prefix`` is added to the
    reference's source before that."""
    source = spec.reference_source + prefix + (
        "\n\n_in_process = 0\n_right = ref_kernel\n\n\n"
        "def ref_kernel(data):\n    global _in_process\n    import os\n    out = _right(data)\n"
        "    if os.environ.get('USER') == 'kernelrank-sandbox' and data[0].numel() >= 100000:\n"
        f"        _in_process += 1\n        if _in_process > {after}:\n            {action}\n    return out\n")
    return type(spec)(spec.definition, source, revision)


@pytest.mark.slow
def test_a_reference_process_wrong_on_a_derived_set_is_the_judges_error(double, options) -> None:
    """On sets derived from the pool the submission's outputs are compared with the reference
    process's; where they disagree the judge's own reference decides. A reference process that
    goes wrong after its first (checked) call, while the submission is right, is the judge's
    failure, never a verdict on the submission."""
    spec = _reference_process_that(double.spec(), "out[0] += 1.0", 1, "wrong-reference-process", _DERIVING)
    with pytest.raises(RuntimeError, match="reference's process gave a wrong output on timed call"):
        evaluate(spec, submission("double_ok.py"), "benchmark", "cpu", options)


@pytest.mark.slow
def test_a_reference_process_that_dies_is_named_as_the_references(double, options) -> None:
    """A reference process that exits during its timed calls is the judge's failure, and its message
    says it was the process running the reference, not the submission's."""
    spec = _reference_process_that(double.spec(), "os._exit(3)", 3, "dying-reference-process")
    with pytest.raises(RuntimeError, match="the reference failed in .*: the process running the reference exited with code 3"):
        evaluate(spec, submission("double_ok.py"), "benchmark", "cpu", options)


def test_each_call_of_a_request_is_checked(double, options) -> None:
    """A kernel wrong on one call in five, after its warm-up: with several calls per request, the
    failing call is found and named all the same."""
    source = ("calls = 0\n\n\ndef custom_kernel(data):\n    global calls\n    calls += 1\n"
              "    out = data[0] + data[0]\n    if calls > 40 and calls % 5 == 0:\n        out[0] += 1.0\n    return out\n")
    r = evaluate(double.spec(), source, "benchmark", "cpu", options)
    assert r.status is Verdict.failed, r.message
    assert "output of timed call" in r.message and "is wrong" in r.message


def test_case_figures_are_paired(double, options) -> None:
    r = evaluate(double.spec(), submission("double_ok.py"), "benchmark", "cpu", options)
    assert r.status is Verdict.passed, r.message
    for c in _bench(r):
        low, high = c.speedup_ci
        assert 0 < low <= c.speedup <= high
        assert c.ref_timing["runs"] == c.timing["runs"] >= c.pairing["pairs"] >= 1
        assert c.reference_ns == pytest.approx(c.pairing["reference_run_ns"])
        assert c.time_ns == pytest.approx(c.reference_ns / c.speedup)
        assert c.time_ci_ns[0] <= c.time_ns <= c.time_ci_ns[1]
        assert 0 < c.pairing["timed_share"] < 1
        assert c.pairing["wall_s"] >= c.pairing["prepare_s"] + c.pairing["check_s"]
        # the preparing's parts: making the inputs and the expected outputs, both measured
        assert c.pairing["inputs_thread_s"] > 0 and c.pairing["expected_thread_s"] > 0
        assert c.pairing["slices"] >= c.pairing["processes"]
    assert r.speedup_ci[0] <= r.speedup <= r.speedup_ci[1]
    assert r.score_ns is None and r.basis == "run"  # benchmark mode: no score


def test_leaderboard_score_is_the_geometric_mean_of_the_cases_times(double, options) -> None:
    r = evaluate(double.spec(), submission("double_ok.py"), "leaderboard", "cpu", options)
    assert r.status is Verdict.passed, r.message
    bench = _bench(r)
    assert r.score_ns == pytest.approx(math.prod(c.time_ns for c in bench) ** (1 / len(bench)))
    assert r.score_ci_ns[0] <= r.score_ns <= r.score_ci_ns[1]
    assert r.speedup == pytest.approx(math.prod(c.speedup for c in bench) ** (1 / len(bench)))
    data = r.to_dict()
    back = EvalResult.from_dict(data)
    assert back.score_ci_ns == pytest.approx(r.score_ci_ns) and back.cases[-1].speedup_ci == pytest.approx(bench[-1].speedup_ci)


@pytest.mark.slow
def test_a_calibration_is_the_basis_of_the_score(double, options) -> None:
    """With the service's calibration (reference times per case), each case's time is that over
    its paired speedup; the run's own reference times are still reported."""
    calibrated = replace(options, calibration_ns=(1e6, 4e6))
    r = evaluate(double.spec(), submission("double_ok.py"), "leaderboard", "cpu", calibrated)
    assert r.status is Verdict.passed, r.message
    assert r.basis == "calibration"
    for c, basis in zip(_bench(r), (1e6, 4e6)):
        assert c.reference_ns == basis and c.time_ns == pytest.approx(basis / c.speedup)
        assert c.pairing["reference_run_ns"] > 0
    assert r.score_ns == pytest.approx(2e6 / r.speedup)
    with pytest.raises(ValueError, match="calibration"):
        evaluate(double.spec(), submission("double_ok.py"), "leaderboard", "cpu", replace(options, calibration_ns=(1e6,)))


@pytest.mark.slow
def test_a_burner_gains_nothing_while_the_reference_is_timed(double, options) -> None:
    """A background thread and a helper process that burn CPU without end: frozen with the job
    outside its own windows, they used no CPU while the reference was timed (the reference's
    cgroup figures say so), so they cannot slow it; they slow only the submission itself."""
    r = evaluate(double.spec(), submission("burn_background.py"), "leaderboard", "cpu", options)
    assert r.status is Verdict.passed, r.message
    if r.isolation.get("containment") == "none":
        pytest.skip("no cgroup on this machine: the submission cannot be frozen")
    for c in _bench(r):
        # unfrozen, the burner's thread and helper would use a CPU or two for the whole of each of
        # the reference's calls; frozen, a side reads 0 ns, or a few µs over a case (8 µs once on
        # CI, on the reference's side: charged to a frozen cgroup's tasks, not work they did):
        # under 1% of the other side's timed calls
        ref_calls_ns = c.ref_timing["mean_ns"] * c.ref_timing["runs"]
        sub_calls_ns = c.timing["mean_ns"] * c.timing["runs"]
        assert c.pairing["submission_cpu_in_reference_windows_ns"] < 0.01 * ref_calls_ns, c.pairing
        assert c.pairing["reference_cpu_in_submission_windows_ns"] < 0.01 * sub_calls_ns, c.pairing
    # and it gained nothing: its speedup over the reference (the same computation) is not above 1
    # beyond the measurement's own uncertainty
    assert r.speedup_ci[0] <= 1.0, (r.speedup, r.speedup_ci)


def test_a_wrong_first_output_is_judged_by_the_full_rule(double, options) -> None:
    """A process's first output on a benchmark case (its warm-up's) is passed by the quick rule
    only when right (``_output_check``): a wrong one fails with the full rule's message and figures,
    and a reference process wrong on its first call is the judge's error."""
    source = ("def custom_kernel(data):\n    out = data[0] + data[0]\n"
              "    if data[0].numel() >= 100000:\n        out[3] += 1.0\n    return out\n")
    r = evaluate(double.spec(), source, "benchmark", "cpu", options)
    assert r.status is Verdict.failed and "output of the first call is wrong" in r.message, r.message
    failed = next(c for c in _bench(r) if not c.passed)
    assert failed.mismatches == 1 and failed.max_abs_error == pytest.approx(1.0, abs=1e-3)
    spec = _reference_process_that(double.spec(), "out[0] += 1.0", 0, "wrong-first-reference")
    with pytest.raises(RuntimeError, match="fails its own check"):
        evaluate(spec, submission("double_ok.py"), "benchmark", "cpu", options)


def test_a_failing_reference_is_the_judges_error(double, options) -> None:
    """The reference's child failing is not a verdict on the submission: the judge raises."""
    broken = double.spec().reference_source.replace("    return data[0] * 2\n",
                                                     "    import os\n    if os.environ.get('USER') == 'kernelrank-sandbox': os._exit(3)\n"
                                                     "    return data[0] * 2\n")
    assert broken != double.spec().reference_source
    spec = double.spec().__class__(double.definition, broken, "broken-reference")
    with pytest.raises(RuntimeError, match="reference"):
        evaluate(spec, submission("double_ok.py"), "benchmark", "cpu", options)


def test_a_reference_its_processes_cannot_load_is_the_judges_error_and_every_process_is_closed(
        double, options) -> None:
    """The timed phase's further processes are loaded two at a time (``TimedPhase._load_all``): a
    reference that cannot be imported in them is the judge's error, raised once every load has
    ended, and no process of the run is left (none still loading when the run closes them)."""
    broken = double.spec().reference_source + (
        "\nimport os\nif os.environ.get('USER') == 'kernelrank-sandbox':\n"
        "    raise ImportError('this reference cannot be imported in a sandbox')\n")
    spec = double.spec().__class__(double.definition, broken, "unloadable-reference")
    with pytest.raises(RuntimeError, match="the reference could not be loaded") as failed:
        evaluate(spec, submission("double_ok.py"), "benchmark", "cpu", replace(options, processes=3))
    assert "cannot be imported in a sandbox" in str(failed.value)
    scratch = str(options.scratch_dir)
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cwd(pid).startswith(scratch)]
    assert left == [], left


def _cwd(pid: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


@pytest.mark.slow
def test_a_run_whose_budget_runs_out_while_the_reference_is_timed_is_a_timeout(double, options) -> None:
    """The mode's budget bounds the whole run: when it runs out during one of the reference's
    requests (the submission's calls spent it, or the machine), the verdict is ``timeout``, as it
    would be during the submission's, not a failure of the judge. Here each reference call takes
    1 s (in the sandbox only), so the 12 s budget runs out in the reference's warm-up."""
    slow = double.spec().reference_source.replace(
        "    return data[0] * 2\n",
        "    import os, time\n    if os.environ.get('USER') == 'kernelrank-sandbox': time.sleep(1.0)\n"
        "    return data[0] * 2\n")
    assert slow != double.spec().reference_source
    short = double.definition.model_copy(update={"budgets": double.definition.budgets.model_copy(update={"benchmark": 12.0})})
    r = evaluate(double.spec().__class__(short, slow, "slow-reference"), submission("double_ok.py"), "benchmark", "cpu",
                 options)
    assert r.status is Verdict.timeout, r.message
    assert "time budget" in r.message


@pytest.mark.slow
def test_a_noisy_case_is_marked_and_the_run_says_so(double, options, monkeypatch) -> None:
    """A case whose interval never narrows enough: after its budget and extra time it is marked
    noisy, and so is the run (which the service does not rank)."""
    spec = _timed_as(double, noisy_above=1e-9, cap=1.5)
    r = evaluate(spec, submission("double_ok.py"), "leaderboard", "cpu", options)
    assert r.status is Verdict.passed, r.message
    assert r.noisy and all(c.noisy for c in _bench(r))
    assert "too noisy to rank" in r.message


@pytest.mark.slow
def test_a_run_whose_score_is_known_well_enough_is_ranked_with_its_noisy_case_named(double, options,
                                                                                     monkeypatch) -> None:
    """The run, not its worst case, decides ranking (stats.run_noisy): with the run's score known
    well enough, a case flagged noisy is named in the message and the run is not noisy."""

    seen: list[tuple[float, int, float]] = []

    def judged(combined: stats.Interval, cases: int, noisy_above: float) -> bool:
        seen.append((combined.within_half_width, cases, noisy_above))
        return False

    monkeypatch.setattr(stats, "run_noisy", judged)
    spec = _timed_as(double, noisy_above=1e-9, cap=1.5)
    r = evaluate(spec, submission("double_ok.py"), "leaderboard", "cpu", options)
    assert r.status is Verdict.passed, r.message
    assert seen == [(seen[0][0], len(_bench(r)), 1e-9)]
    assert not r.noisy and all(c.noisy for c in _bench(r)) and r.score_ns is not None
    assert "too noisy to rank" not in r.message and "which the score's interval includes" in r.message


def test_a_request_is_small_enough_for_the_budget_to_hold_several_pairs() -> None:
    """On the CPU a request holds ``REQUEST_SECONDS`` of calls, but no more than lets the case's
    budget hold ``judging.MIN_PAIRS`` pairs: on a short budget a case must still get an interval."""
    from types import SimpleNamespace


    judge = SimpleNamespace(device="cpu")
    paired = SimpleNamespace(sub=SimpleNamespace(warm_ns=2_000_000), ref=SimpleNamespace(warm_ns=3_000_000))
    small = SimpleNamespace(nbytes=1 << 20)
    size = harness._Evaluation._sets_per_request
    assert size(judge, paired, small, 3.0) == min(MAX_SETS_PER_REQUEST,
                                                  math.ceil(REQUEST_SECONDS / 0.002))
    short = size(judge, paired, small, 0.15)
    assert short == 1
    for budget in (0.3, 1.0, 3.0):  # what the budget holds: MIN_PAIRS pairs of both sides' calls
        k = size(judge, paired, small, budget)
        assert k == 1 or 2 * judging.MIN_PAIRS * k * 0.002 <= budget * TIMED_SHARE_GUESS
    assert size(SimpleNamespace(device="cuda"), paired, small, 3.0) == 1


@pytest.mark.slow
def test_the_cases_are_timed_in_rounds_each_on_a_pair_of_processes(double, options, monkeypatch) -> None:
    """A timed case's pairs are timed by ``judging.PROCESSES`` pairs of processes (the test phase's
    process of the submission and new ones, as many of the reference), in slices: in round ``r``
    every case gets a slice on pair ``r % K``, the cases one after the other, so each case is
    timed on every pair at ``K`` moments spread over the run (``harness._Evaluation._rounds``);
    the ``pairs`` event and the case's figures say which pair timed each pair, and the interval
    carries the pairs' offsets. A problem may ask for one pair (``timing.<device>.processes``)."""

    k = judging.PROCESSES["cpu"]
    assert k > 1
    made: list[tuple[str, int, int, str]] = []  # (side, which process, its pid, the case), per request
    sizes: set[tuple[int, int]] = set()  # (processes of the side, of the other side)
    timed = harness._Evaluation._timed_request

    def recording_request(self, side, other, sets, deadline):
        made.append((side.name, side.current, side.child.pid, self._where))
        sizes.add((len(side.children), len(other.children)))
        return timed(self, side, other, sets, deadline)

    monkeypatch.setattr(harness._Evaluation, "_timed_request", recording_request)
    events: list[dict] = []
    options = replace(options, processes=None)  # the device's default: several
    r = evaluate(double.spec(), submission("double_ok.py"), "leaderboard", "cpu", options, events.append)
    assert r.status is Verdict.passed, r.message
    assert sizes == {(k, k)}
    pids = {side: {n: {pid for s, m, pid, _c in made if s == side and m == n} for n in range(k)} for side in ("submission", "reference")}
    for side in pids:
        assert all(len(p) == 1 for p in pids[side].values()), pids  # one process per place
        assert len(set().union(*pids[side].values())) == k  # k distinct processes per side
    assert not set().union(*pids["submission"].values()) & set().union(*pids["reference"].values())
    pairs = {e["case"]: e["pairs"] for e in events if e["event"] == "pairs"}
    slices = [(case, m) for _s, m, _pid, case in made]
    slices = [x for i, x in enumerate(slices) if i == 0 or x != slices[i - 1]]  # runs of requests
    cases = sorted({case for case, _m in slices})
    assert len(cases) == len(_bench(r)) > 1
    # round by round, each case in turn, on the round's pair of processes: no case stops before
    # it was timed on every pair
    assert slices[:k * len(cases)] == [(case, j) for j in range(k) for case in cases]
    for c in _bench(r):
        made_by = [p[8] for p in pairs[c.index]]
        blocks = [j for i, j in enumerate(made_by) if i == 0 or j != made_by[i - 1]]
        assert blocks == [i % k for i in range(len(blocks))] and len(blocks) == c.pairing["slices"] >= k
        assert c.pairing["processes"] == k and c.pairing["between_processes_log_se"] >= 0
        assert c.speedup_ci[0] <= c.speedup <= c.speedup_ci[1]
    # one pair of processes where the problem says so
    one = _timed_as(double, processes=1)
    made.clear()
    r = evaluate(one, submission("double_ok.py"), "benchmark", "cpu", options)
    assert r.status is Verdict.passed, r.message
    assert {m for _s, m, _pid, _c in made} == {0} and len({pid for _s, _m, pid, _c in made}) == 2
    assert all(c.pairing["processes"] == 1 and c.pairing["between_processes_log_se"] == 0 for c in _bench(r))


@pytest.mark.slow
def test_a_slice_ends_at_its_counted_pairs_and_a_case_once_every_pair_of_processes_had_one(
        double, options, monkeypatch) -> None:
    """On the CPU a case's slice ends once it holds ``timed.SLICE_PAIRS`` counted pairs (before its
    time: ``double``'s pairs take a few ms, its slices here 250 ms), and a case within its target stops as
    soon as each pair of processes had its slice with ``MIN_PAIRS`` counted over them, not at half
    its budget. Without the rule a slice runs its time: more pairs than it needs."""
    from kernelrank.runner.judge import timed

    k = judging.PROCESSES["cpu"]
    limit = timed.SLICE_PAIRS["cpu"]
    assert limit and limit * k >= judging.MIN_PAIRS  # four slices of it can settle a case

    spec = _timed_as(double, leaderboard=2.0)

    def slices_of(rule: int | None) -> tuple[dict[int, list[int]], list]:
        monkeypatch.setitem(timed.SLICE_PAIRS, "cpu", rule)
        events: list[dict] = []
        r = evaluate(spec, submission("double_ok.py"), "leaderboard", "cpu", replace(options, processes=None),
                     events.append)
        assert r.status is Verdict.passed, r.message
        counted: dict[int, list[int]] = {}  # per case, counted pairs per slice (a run of one pair of processes)
        for e in (e for e in events if e["event"] == "pairs"):
            blocks: list[int] = []
            for i, p in enumerate(e["pairs"]):
                if i == 0 or p[8] != e["pairs"][i - 1][8]:
                    blocks.append(0)
                blocks[-1] += p[9]
            counted[e["case"]] = blocks
        return counted, _bench(r)

    counted, cases = slices_of(limit)
    for c in cases:
        blocks = counted[c.index]
        assert max(blocks) <= limit, blocks
        assert len(blocks) == c.pairing["slices"], (blocks, c.pairing)  # a slice stopped before a batch is none
        if sum(blocks[:k]) >= judging.MIN_PAIRS:  # within double's target from the start: done there
            assert c.pairing["slices"] == k, (blocks, c.pairing)
    counted, _cases = slices_of(None)
    assert max(max(blocks) for blocks in counted.values()) > limit, counted


@pytest.mark.slow
def test_a_pair_counts_once_both_of_its_processes_are_warm(double, options, monkeypatch) -> None:
    """A process is warm from its first request after one that page-faulted at most
    ``WARM_FAULTS_PER_CALL`` times per call (the kernel's count, read by the judge), or after
    ``WARMUP_MAX_REQUESTS``; a pair counts only when both of its processes were warm before it.
    Uncounted pairs are timed and checked all the same, and the ``pairs`` event marks them. Here
    the reference's second process faults on its first three timed requests of each case, and
    the submission's third on every request (its steady state, timed so after the limit)."""
    from kernelrank.runner import timing

    timed = harness._Evaluation._timed_request
    made: collections.Counter = collections.Counter()

    def faulting_request(self, side, other, sets, deadline):
        call, replies = timed(self, side, other, sets, deadline)
        key = (self._where, side.name, side.current)
        made[key] += 1
        which = (side.name, side.current)
        heavy = which == ("reference", 1) and made[key] <= 3 or which == ("submission", 2)
        call.faults = 10**6 if heavy else 0
        return call, replies

    monkeypatch.setattr(harness._Evaluation, "_timed_request", faulting_request)
    events: list[dict] = []
    options = replace(options, processes=4)  # processes 0-3 of each side
    r = evaluate(double.spec(), submission("double_ok.py"), "leaderboard", "cpu", options, events.append)
    assert r.status is Verdict.passed, r.message
    pairs = {e["case"]: e["pairs"] for e in events if e["event"] == "pairs"}
    for c in _bench(r):
        by_process: dict[int, list[int]] = collections.defaultdict(list)
        for p in pairs[c.index]:
            by_process[p[8]].append(p[9])
        first = {j: flags.index(1) if 1 in flags else len(flags) for j, flags in by_process.items()}
        assert first[0] == first[3] == 1  # a calm first request: counted from the second
        assert first[1] == min(4, len(by_process[1]))  # three faulting requests, then a calm one
        assert first[2] == min(timing.WARMUP_MAX_REQUESTS, len(by_process[2]))  # always faulting: after the limit
        assert all(flags[first[j]:] == [1] * (len(flags) - first[j]) for j, flags in by_process.items())
        assert c.pairing["warm_up_pairs"] == sum(first.values())
        assert c.pairing["faults_per_call"]["reference"] == 0
        # the always-faulting process's pairs count after the limit, if the case lasted that long
        # (a slow moment can end a case first: seen once on a 2-core machine)
        assert (c.pairing["faults_per_call"]["submission"] > 0) == (1 in by_process[2])


def test_the_logs_of_every_timed_process_are_kept() -> None:
    """What the submission's further timed processes printed follows its first process's output,
    under a line naming each; a process that printed nothing adds nothing."""
    merged = harness._merged_logs({"stdout": "first\n", "stderr": ""},
                                  [(2, {"stdout": "", "stderr": ""}), (3, {"stdout": "third\n", "stderr": "warn\n"})])
    assert merged["stdout"] == "first\n\n--- timed process 3 ---\nthird\n"
    assert merged["stderr"] == "\n--- timed process 3 ---\nwarn\n"
