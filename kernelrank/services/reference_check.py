"""Checking that a problem's reference passes its own tests, and that its tolerances can tell
right from wrong (:mod:`kernelrank.runner.judge.reference_audit`: the reference's own error
against float64 within half its tolerance; zeros or a constant fail it), before the problem is stored.

:func:`check_reference` runs the harness (``evaluate(spec, reference_submission(spec), "test",
"cpu")``, exactly as a submission's test run) in a separate Python process, so the API process
never imports torch nor executes the uploaded reference itself, and a hard time limit can end it:
the problem's compile and test budgets plus :data:`MARGIN_S`. The child runs isolated as a runner
does (``settings.runner_isolation``, the data folder hidden). The check runs on the CPU device
only: a reference that fails only on CUDA is not caught here.

Run as ``python -m kernelrank.services.reference_check``: reads the spec message (JSON) on stdin,
writes ``{"status": ..., "message": ...}`` on stdout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any, Callable

from kernelrank.problems import ProblemSpec
from kernelrank.vocab import DeviceClass, Mode, Verdict

#: ``check(spec) -> None`` when the reference passes its own tests, else the reason (one message).
ReferenceCheck = Callable[[ProblemSpec], "str | None"]

#: Seconds on top of the problem's compile + test budgets (the child's Python and torch start-up).
MARGIN_S = 60.0


def time_limit(spec: ProblemSpec) -> float:
    """Seconds the check may take for ``spec``."""
    budgets = spec.definition.budgets
    return budgets.compile + budgets.test + MARGIN_S


def check_reference(spec: ProblemSpec) -> str | None:
    """``None`` when ``spec``'s reference passes every test case on the CPU, else why not
    (the harness's verdict and message, or a time-out). Never raises for what the reference does.
    A CUDA-only problem (``definition.cuda_only``) is not run here: its reference needs a GPU."""
    if spec.definition.cuda_only:
        return None
    limit = time_limit(spec)
    proc = subprocess.Popen([sys.executable, "-m", "kernelrank.services.reference_check"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=_child_env())
    try:
        out, err = proc.communicate(json.dumps(spec.to_message()), timeout=limit)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return f"the reference's test run did not finish within {limit:g} s"
    try:
        verdict = json.loads(out.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = (err or "").strip().splitlines()[-1:] or ["no output"]
        return f"the reference check failed (exit status {proc.returncode}): {tail[0][:500]}"
    if verdict.get("status") == Verdict.passed:
        return None
    return f"{verdict.get('status', 'error')}: {str(verdict.get('message', ''))[:2000]}"


#: Settings the check's process has no use for, and which hold credentials: never passed on.
CREDENTIALS = ("KERNELRANK_DATABASE_URL", "KERNELRANK_BROKER_URL", "KERNELRANK_TOKEN")


def _child_env() -> dict[str, str]:
    """This process's environment minus :data:`CREDENTIALS`: the reference runs unsandboxed on
    the judge's side of the check (trusted admin code, but nothing it needs)."""
    return {k: v for k, v in os.environ.items() if k not in CREDENTIALS}


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def _run(message: dict[str, Any]) -> dict[str, Any]:
    from kernelrank.runner.judge.answers import reference_submission
    from kernelrank.runner.judge.harness import EvalOptions, evaluate
    from kernelrank.settings import get_settings

    settings = get_settings()
    try:
        spec = ProblemSpec.from_message(message)
        options = EvalOptions(threads=settings.cpu_threads, scratch_dir=settings.scratch_dir,
                              log_limit=settings.log_limit_bytes, isolation=settings.runner_isolation,
                              hidden_paths=(settings.data_dir.resolve(),))
        result = evaluate(spec, reference_submission(spec), Mode.test.value, DeviceClass.cpu.value, options)
        if result.status is Verdict.passed:
            from kernelrank.runner.judge.reference_audit import audit

            findings = audit(spec)  # the tolerances against the reference's own error and degenerate outputs
            if findings:
                return {"status": Verdict.failed.value, "message": "tolerances: " + "; ".join(findings)}
    except Exception as e:  # noqa: BLE001 - a broken reference is a verdict here, not a crash
        return {"status": Verdict.error.value, "message": f"{type(e).__name__}: {e}"}
    return {"status": result.status.value,
            "message": result.message}


def main() -> None:
    """Entry point of the check's process: spec message on stdin, verdict on stdout."""
    verdict = _run(json.loads(sys.stdin.read()))
    sys.stdout.write("\n" + json.dumps(verdict, default=str) + "\n")


if __name__ == "__main__":
    main()
