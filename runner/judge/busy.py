"""When the machine is too busy for the judge: a run it could not finish timing is a run to measure
again, never a verdict on the submission.

The reference's processes are the judge's own (trusted code, frozen outside their windows like the
submission's). One that does not answer within its call's deadline (``max(call_floor, call_factor x
the reference's time)``, 10 s at least), or whose processes do not stop within the freeze's timeout
after a call (5 s), is not a broken problem: the same request took milliseconds at idle. It is a
machine so loaded (other tenants, swapping) that the pair cannot be timed honestly now. The run
then ends :func:`unmeasured`: ``passed`` on every check made, ``noisy``, without a speedup or a
score, which the service answers by measuring the submission again later
(``kernelrank.judgement.measure_again``, backing off). A reference that raises, dies, or gives a
wrong output is still the judge's error (:class:`~kernelrank.runner.judge.answers.ReferenceFailed`):
that would fail the same way at idle.

Nothing here pays a submission that causes its own noise: contained (every leaderboard run on a
runner), its processes are frozen outside its own windows (the job's cgroup), so it cannot load the
machine while the reference runs; and a run ended unmeasured takes no rank, its measurements made
again are bounded, and the admins are told after the last (:mod:`kernelrank.services.remeasure`).
Every check of the submission stays as it was: its own call past its deadline is its ``timeout``,
its processes that do not stop after a call a breach (``rejected``).
"""

from __future__ import annotations

from kernelrank.runner.judge.answers import ReferenceFailed
from kernelrank.runner.results import EvalResult
from kernelrank.vocab import CaseKind, Verdict


class JudgeBusy(ReferenceFailed):
    """The reference's process did not answer within its call's deadline, or did not stop after
    it: the machine is too busy for the judge to time the pair now (a retryable outcome,
    :func:`unmeasured`; not ``error``)."""


def unmeasured(result: EvalResult, why: str) -> None:
    """End ``result`` as a run the judge could not finish timing (:class:`JudgeBusy`), in place:
    ``passed`` on the checks made (every test case, and each timed case's calls so far),
    ``noisy`` with no speedup and no score, so that it takes no rank and a leaderboard
    submission is measured again; the message says why."""
    tests = sum(1 for c in result.cases if c.kind == CaseKind.test)
    result.status = Verdict.passed
    result.noisy = True
    result.speedup = result.speedup_ci = result.speedup_interval = None
    result.score_ns = result.score_ci_ns = None
    result.message = (f"all {tests} test cases passed; not measured: {why}; "
                      "not ranked until measured again")[:4000]
