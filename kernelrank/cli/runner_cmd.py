"""``kernelrank runner``: judge submissions from one device queue (a Celery worker).

The worker consumes exactly one queue (``cpu``, or ``cuda-<model>`` named after this machine's
GPU), one job at a time (concurrency 1, prefetch 1, late acknowledgement) in a prefork pool, so
each job's time limits apply and a crash in the judge loses the pool process, not the runner.
Gossip, mingle and the event heartbeat are off: the embedded filesystem broker is polled, and
liveness is the runner's own heartbeat to the server.
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
    """This machine's first CUDA device name, asked in a short subprocess so that CUDA is never
    initialised in the worker's main process (its forked pool processes could not use it).
    ``None`` when torch sees no CUDA device."""
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


def runner(
    device: Annotated[str, typer.Option(
        help="Device queue to consume: cpu | cuda-<model> (e.g. cuda-h100) | cuda (this GPU's queue) | auto "
             "(this GPU's queue when one is visible, else cpu).")] = vocab.AUTO,
    queue: Annotated[Optional[str], typer.Option(help="Older spelling of --device with a device queue.",
                                                 hidden=True)] = None,
    loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "INFO",
) -> None:
    """Judge submissions from one device queue until stopped (Ctrl-C)."""
    from kernelrank.settings import get_settings

    chosen = choose_queue(device, queue)
    settings = get_settings()
    from kernelrank.runner.worker import app  # registers the task; imports no torch yet

    typer.echo(f"kernelrank runner: queue {chosen}, "
               f"{broker_description(settings.resolved_broker_url(), str(settings.broker_folder))}", err=True)
    app.worker_main(argv=worker_argv(chosen, loglevel))
