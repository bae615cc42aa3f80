"""``kernelrank runner``: judge submissions from one device queue (a Celery worker).

The worker consumes exactly one queue (``cpu``, or ``cuda-<model>`` named after this machine's
GPU), one job at a time (concurrency 1, prefetch 1, late acknowledgement) in a prefork pool, so
each job's time limits apply and a crash in the judge loses the pool process, not the runner.
Gossip, mingle and the event heartbeat are off: the embedded filesystem broker is polled, and
liveness is the runner's own heartbeat to the server.

Before it takes a job the runner runs its quick self-test (``runner/host/selftest.py``, about two
minutes; only its probes where this code, host and device passed before) and takes none if it
fails; its heartbeat shows the progress (``starting: self-test 12/30``). ``--self-test`` runs the
quick self-test alone and exits with its status; ``--self-test --full`` runs every template,
example and attack in every mode.
On a machine with several GPUs run one runner per GPU: ``--gpu N`` sets ``CUDA_VISIBLE_DEVICES``
(with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, so N is nvidia-smi's index) for the runner and its children,
and the sandbox shows each child only that GPU's device files.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Annotated, Optional
from urllib.parse import urlsplit

import typer

from kernelrank import vocab


def mask_url(url: str) -> str:
    """``url`` with any user name and password replaced by ``***`` (for printing)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc=f"***@{host}").geturl()


def broker_description(url: str, folder: str) -> str:
    """Where the broker is, for humans: the folder of the filesystem broker, else the masked URL."""
    if url.startswith("filesystem"):
        return f"filesystem broker in {folder}"
    return f"broker {mask_url(url)}"


def gpu_name(timeout: float = 120.0) -> str | None:
    """The runner's GPU's name as NVML reports it (a MIG slice's includes its profile), else as
    torch does, asked in a short subprocess so that CUDA is never initialised in the worker's main
    process (its forked pool processes could not use it). ``None`` when there is no CUDA device."""
    import os

    from kernelrank.runner.host import gpuinfo

    facts = gpuinfo.runner_gpu(os.environ.get("CUDA_VISIBLE_DEVICES"))
    if facts.get("name"):  # pragma: no cover - GPU-only: NVML answers where a driver is loaded
        return str(facts["name"])
    code = "import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    name = out.stdout.strip().splitlines()[-1].strip() if out.returncode == 0 and out.stdout.strip() else ""
    return name or None


def choose_queue(device: str, queue: str | None = None) -> str:
    """The queue to consume. ``device`` is a device queue (``cpu``, ``cuda-<model>``), ``cuda``
    (this machine's GPU's queue) or ``auto`` (the GPU's queue when one is visible, else ``cpu``).
    ``queue`` is the older spelling of a device queue (``--queue``), checked against ``device``.

    Raises:
        typer.BadParameter: not a device queue, a queue of another device class, or ``cuda``
            without a CUDA device.
    """
    if queue:
        try:
            cls = vocab.device_class(queue)
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint="--queue") from None
        if device not in (vocab.AUTO, cls, queue):
            raise typer.BadParameter(f"queue {queue!r} is for {cls} runners, not {device}", param_hint="--queue")
        return queue
    if vocab.is_device_queue(device):
        return device
    if device not in (vocab.AUTO, vocab.LOCAL_CUDA):
        raise typer.BadParameter(f"{device!r} is not a device queue: cpu, cuda-<model> (e.g. cuda-h100), "
                                 "cuda (this machine's GPU) or auto", param_hint="--device")
    name = gpu_name()
    if name is None:
        if device == vocab.LOCAL_CUDA:
            raise typer.BadParameter("torch sees no CUDA device on this machine (use --device cpu)", param_hint="--device")
        return vocab.CPU_QUEUE
    return vocab.gpu_queue_name(name)


def worker_argv(queue: str, loglevel: str = "INFO") -> list[str]:
    """Arguments of the Celery worker of a runner consuming ``queue``."""
    import os

    return [
        "worker", "--queues", queue, "--concurrency", "1", "--pool", "prefork", "--prefetch-multiplier", "1",
        "--without-gossip", "--without-mingle", "--without-heartbeat",
        "--hostname", f"runner-{queue}-{os.getpid()}@%h", "--loglevel", loglevel,
    ]


def pin_gpu(index: int, environ: dict[str, str] | None = None) -> None:
    """One runner per GPU: make GPU ``index`` (nvidia-smi's numbering) the only one this process
    and its children see (``CUDA_VISIBLE_DEVICES``; ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so CUDA's
    numbering is NVML's). Call before anything initialises CUDA.

    Raises:
        typer.BadParameter: a negative index.
    """
    import os

    if index < 0:
        raise typer.BadParameter("a GPU index is 0 or more", param_hint="--gpu")
    env = os.environ if environ is None else environ
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    env["CUDA_VISIBLE_DEVICES"] = str(index)


def runner(
    device: Annotated[str, typer.Option(
        help="Device queue to consume: cpu | cuda-<model> (e.g. cuda-h100-sxm) | cuda (this GPU's queue) | auto "
             "(this GPU's queue when one is visible, else cpu).")] = vocab.AUTO,
    queue: Annotated[Optional[str], typer.Option(help="Older spelling of --device with a device queue.",
                                                 hidden=True)] = None,
    gpu: Annotated[Optional[int], typer.Option(
        help="Serve only GPU N (nvidia-smi's index): one runner process per GPU.")] = None,
    self_test: Annotated[bool, typer.Option(
        "--self-test", help="Run the quick self-test on the device (what a runner runs before its first job: the "
                            "sandbox, the toolchains, one correct and one wrong kernel per problem, the reference "
                            "against itself, a handful of attacks; about 2 min), print a table and exit non-zero "
                            "on any failure.")] = False,
    full: Annotated[bool, typer.Option(
        "--full", help="With --self-test: every template, example and attack in every mode (says how long first).")] = False,
    quick: Annotated[bool, typer.Option(help="With --self-test: the quick self-test (the default).", hidden=True)] = False,
    problem: Annotated[Optional[list[str]], typer.Option(help="With --self-test: only this problem (repeatable).")] = None,
    mode: Annotated[Optional[list[str]], typer.Option(help="With --self-test: only this mode (repeatable).")] = None,
    no_attacks: Annotated[bool, typer.Option(
        "--no-attacks", help="With --self-test: leave out the attack corpus (the longest part on the CPU).")] = False,
    no_self_test: Annotated[bool, typer.Option(
        "--no-self-test", help="Take jobs without the start-up self-test (shown as not run).")] = False,
    loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "INFO",
) -> None:
    """Judge submissions from one device queue until stopped (Ctrl-C); first, its self-test."""
    from kernelrank.settings import get_settings

    if gpu is not None:
        pin_gpu(gpu)
    if self_test:
        from kernelrank.runner.host import selftest

        cls = vocab.device_class(choose_queue(device, queue)) if device != vocab.LOCAL_CUDA else vocab.DeviceClass.cuda.value
        argv = ["--device", cls, "--scope", "full" if full else "quick"]
        argv += [a for p in problem or [] for a in ("--problem", p)] + [a for m in mode or [] for a in ("--mode", m)]
        argv += ["--no-attacks"] if no_attacks else []
        raise typer.Exit(selftest.main(argv))
    chosen = choose_queue(device, queue)
    settings = get_settings()
    from kernelrank.runner import worker
    from kernelrank.runner.worker import app  # registers the task; imports no torch yet

    typer.echo(f"kernelrank runner: queue {chosen}, "
               f"{broker_description(settings.resolved_broker_url(), str(settings.broker_folder))}", err=True)
    if vocab.device_class(chosen) == vocab.DeviceClass.cuda and settings.runner_lock_clocks:  # pragma: no cover - GPU-only
        typer.echo(f"kernelrank runner: clocks {worker.lock_gpu_clocks(settings.runner_lock_sm_clock_mhz)}", err=True)
    testing = settings.runner_self_test and not no_self_test
    worker.check_containment()  # can it make job cgroups? where not, the problem and its fix are logged once
    # the device queue keeps taking submissions while this runner starts (they wait for it)
    worker.announce_start(worker.configure(chosen), "self-test" if testing else "worker")
    if testing:
        typer.echo("kernelrank runner: self-test before taking jobs (--no-self-test to skip)", err=True)
        if not worker.self_test_gate(chosen):
            typer.echo("kernelrank runner: the self-test failed; this runner takes no jobs", err=True)
            worker.stop_heartbeat(worker.identity())
            raise typer.Exit(1)
    app.worker_main(argv=worker_argv(chosen, loglevel))
