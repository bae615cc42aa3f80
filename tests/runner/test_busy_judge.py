"""A machine too busy for the judge ends a run unmeasured, never in ``error``
(:mod:`kernelrank.runner.judge.busy`): the reference's process not answering within its call's
deadline is what load looks like from the judge, and is simulated here by a reference process that
stalls; a reference that fails otherwise stays the judge's error."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from kernelrank.problems import ProblemSpec
from kernelrank.runner.containment.sandbox import ChildDied, ChildTimeout, ChildUnfrozen, ProtocolViolation
from kernelrank.runner.judge.answers import ReferenceFailed, RunEnded
from kernelrank.runner.judge.busy import JudgeBusy, unmeasured
from kernelrank.runner.judge.harness import evaluate
from kernelrank.runner.judge.windows import Requests
from kernelrank.runner.results import CaseResult, EvalResult
from kernelrank.vocab import Verdict
from tests.conftest import submission


def _raised_through(side: str, error: BaseException, deadline: float = float("inf")) -> BaseException:
    """What the judge raises when a request of ``side``'s process raised ``error``."""
    judge = SimpleNamespace(_where="benchmark case 1 (N=400000)")
    with pytest.raises(BaseException) as caught:
        with Requests._reference_failures(judge, SimpleNamespace(name=side), deadline):
            raise error
    return caught.value


def test_a_reference_call_past_its_deadline_is_the_machine_being_busy_not_a_broken_problem() -> None:
    timed_out = RunEnded(Verdict.timeout, "timeout: the call did not return within its deadline of 10 s")
    busy = _raised_through("reference", timed_out)
    assert isinstance(busy, JudgeBusy) and "benchmark case 1" in str(busy) and "too busy" in str(busy)
    assert isinstance(_raised_through("reference", ChildTimeout("no answer")), JudgeBusy)
    unfrozen = ChildUnfrozen("the reference's processes could not be stopped after the call")
    assert isinstance(_raised_through("reference", unfrozen), JudgeBusy)


def test_a_reference_that_dies_or_errs_is_still_the_judges_error_and_the_submissions_failures_pass() -> None:
    for error in (ChildDied("the process running the reference exited with code 3", 3),
                  ProtocolViolation("the child's answer is not a well-formed reply"),
                  RunEnded(Verdict.error, "runtime error in benchmark case 1: boom")):
        failed = _raised_through("reference", error)
        assert isinstance(failed, ReferenceFailed) and not isinstance(failed, JudgeBusy)
    # the run's own budget spent: the run's timeout, whoever was running
    assert isinstance(_raised_through("reference", ChildTimeout("no answer"), deadline=time.monotonic() - 1),
                      ChildTimeout)
    # the submission's own: a timeout stays its timeout, processes that do not stop stay a breach
    for mine in (RunEnded(Verdict.timeout, "timeout: the submission's call"),
                 ChildUnfrozen("the submission's processes could not be stopped after the call")):
        assert _raised_through("submission", mine) is mine


def test_unmeasured_is_a_passing_noisy_run_without_figures() -> None:
    r = EvalResult(Verdict.passed, "leaderboard", "double", "rev", "cpu", speedup=1.5, score_ns=100.0,
                   speedup_ci=[1.2, 1.8], score_ci_ns=[90.0, 110.0],
                   cases=[CaseResult("test", 0, {}, True, "ok"), CaseResult("test", 1, {}, True, "ok")])
    unmeasured(r, "the reference's process did not answer")
    assert r.status is Verdict.passed and r.noisy
    assert r.speedup is r.score_ns is r.speedup_ci is r.score_ci_ns is None
    assert r.message.startswith("all 2 test cases passed; not measured: the reference's process did not answer")


def test_a_reference_stalled_past_its_call_deadline_leaves_a_correct_kernel_passed_and_unmeasured(
        double, options) -> None:
    """The reference's timed process stalls (as on a machine swapping under other tenants' load):
    the run is passed, noisy, without a speedup or a score, and says it was not measured."""
    d = double.spec().definition
    stalls = ("\n\n_calls = 0\n_right = ref_kernel\n\n\ndef ref_kernel(data):\n    global _calls\n    import os, time\n"
              "    if os.environ.get('USER') == 'kernelrank-sandbox' and data[0].numel() >= 100000:\n"
              "        _calls += 1\n        if _calls > 3:\n            time.sleep(60)\n    return _right(data)\n")
    budgets = d.budgets.model_copy(update={"call_floor": 0.25, "call_factor": 2.0})
    spec = ProblemSpec(d.model_copy(update={"budgets": budgets}), double.spec().reference_source + stalls,
                       "stalling-reference")
    r = evaluate(spec, submission("double_ok.py"), "leaderboard", "cpu", options)
    assert r.status is Verdict.passed, r.message
    assert r.noisy and r.speedup is None and r.score_ns is None
    assert "not measured: the reference's process did not answer" in r.message and "too busy" in r.message
