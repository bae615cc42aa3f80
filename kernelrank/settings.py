"""The one settings object: every ``KERNELRANK_*`` environment variable is read here and nowhere else."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

#: The checkout (or install) root that holds ``problems/`` and ``reference_kernels/``.
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _config_home() -> Path:
    """The XDG config folder: ``$XDG_CONFIG_HOME`` when set to an absolute path, else ``~/.config``."""
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    return Path(xdg) if xdg and os.path.isabs(xdg) else Path(os.path.expanduser("~/.config"))


class Settings(BaseSettings):
    """Settings from ``KERNELRANK_<FIELD>`` environment variables (pydantic-settings)."""

    model_config = SettingsConfigDict(env_prefix="KERNELRANK_", extra="ignore", populate_by_name=True)

    problems_dir: Path = PROJECT_ROOT / "problems"
    reference_kernels_dir: Path = PROJECT_ROOT / "reference_kernels"
    #: Parent folder of the per-evaluation working folders given to submitted code.
    scratch_dir: Path | None = None
    #: Intra-op threads for submitted code and the reference on the CPU device; 0 = all cores.
    cpu_threads: int = Field(default=0, ge=0)
    #: Bytes of the submission's stdout and of its stderr kept as logs (head and tail halves).
    log_limit_bytes: int = Field(default=64 * 1024, ge=1024)
    #: How a runner isolates submitted code: ``auto`` (the strongest method this machine supports),
    #: ``setuid`` (needs root), ``userns`` or ``none``; see ``kernelrank.runner.containment.isolation``.
    runner_isolation: Literal["auto", "setuid", "userns", "none"] = "auto"
    #: A runner refuses leaderboard jobs when it cannot cut submitted code off the network or contain
    #: it in a cgroup frozen outside its calls (runner/containment/cgroups.py), unless
    #: its operator sets this (the result still records that the network was not isolated).
    runner_allow_unisolated_network: bool = False
    #: Fork each child from a zygote with torch already imported (saves about a second per run).
    runner_warm_start: bool = True
    #: A runner runs its quick self-test (``kernelrank runner --self-test``) before taking a job,
    #: and takes none if it fails (``--no-self-test`` or false: start at once, shown "not run").
    runner_self_test: bool = True
    #: Hours a passing self-test stands for a restarted runner with the same code, host and device,
    #: which then runs only the probes (``runner/host/selftest_cache.py``); 0: never.
    runner_self_test_cache_hours: float = Field(default=7 * 24.0, ge=0)
    #: Folder of the runner's cache (self-test passes, step times); default
    #: ``$XDG_CACHE_HOME/kernelrank`` or ``~/.cache/kernelrank``.
    runner_cache_dir: Path | None = None
    #: Lock the GPU's SM clock while the runner runs (NVML, needs root): at
    #: ``runner_lock_sm_clock_mhz``, or 0 for the GPU's default applications (base) clock.
    runner_lock_clocks: bool = False
    runner_lock_sm_clock_mhz: int = Field(default=0, ge=0)
    #: Measure the device's ceilings (copy bandwidth, matmul rate per dtype) when the runner starts
    #: (a few seconds before its first job) and report them with its heartbeat, for roofline shares.
    runner_ceilings: bool = True
    #: Minutes between probes of the ceilings while the runner is idle (each merged into the best
    #: of its recent probes: ``runner/host/ceiling_probes.py``); 0: only at start.
    runner_ceilings_refresh_minutes: float = Field(default=30.0, ge=0)

    # -- the service ------------------------------------------------------------------------------
    #: Folder of the embedded default: SQLite database, file broker, logs.
    data_dir: Path = Path(".kernelrank")
    #: SQLAlchemy URL; default ``sqlite:///<data_dir>/kernelrank.db``. Postgres: ``postgresql+psycopg://...``.
    database_url: str | None = None
    #: Celery broker URL; default the kombu filesystem transport under ``<data_dir>/broker``.
    #: Redis: ``redis://host:6379/0``.
    broker_url: str | None = None
    #: Largest accepted submission source, in bytes.
    max_code_bytes: int = Field(default=256 * 1024, ge=1024)
    #: A runner is online when its last heartbeat is at most this many seconds old.
    runner_online_seconds: float = Field(default=60.0, gt=0)
    #: A device queue whose last runner was seen at most this many hours ago keeps taking
    #: submissions while no runner is online (a restart, an upgrade, a GPU runner's self-test):
    #: they wait in the queue. Queues no runner served in this time are refused.
    runner_remember_hours: float = Field(default=72.0, ge=0)
    #: Seconds between a runner's heartbeats.
    heartbeat_seconds: float = Field(default=15.0, gt=0)
    #: Seconds a Redis broker waits for a job's acknowledgement before handing it to another
    #: runner (Celery's ``visibility_timeout``; the runner acknowledges when the job is done).
    #: Keep it above the longest job: a job still running then is delivered again, and the copy
    #: is dropped unrun (the control worker sees its first runner alive), but it costs a delivery.
    #: A runner that died has its job back after this long, or sooner through the sweeper.
    broker_visibility_timeout: float = Field(default=6 * 3600.0, gt=0)
    #: Prefix of every key the Redis broker writes (deployments or tests sharing one Redis).
    broker_key_prefix: str = ""
    #: Times a job may be started before it ends as ``error`` ("the runner died N times running
    #: this job"): runners that die or vanish mid-job get it again up to this bound.
    job_max_starts: int = Field(default=3, ge=1, validation_alias=AliasChoices(
        "KERNELRANK_JOB_MAX_STARTS", "KERNELRANK_JOB_MAX_ATTEMPTS"))  # the second: its deprecated name
    #: Times a passing leaderboard submission is measured again, by itself, when its runs were too
    #: noisy to rank, could not be measured (the machine too busy) or disagree (the machine's speed
    #: moved between them): each time both runs again, all its runs then combined
    #: (``judgement.over_measurements``); after the last the admins are told. 0 turns it off (an
    #: admin's requeue still measures it afresh).
    remeasures: int = Field(default=3, ge=0, le=10)
    #: Seconds the first measurement made again waits before its job is sent; each later one waits
    #: ``remeasure_backoff`` times longer (30 s, 2 min, 8 min): the load that spoiled a measurement
    #: often lasts minutes. 0: sent at once.
    remeasure_delay_seconds: float = Field(default=30.0, ge=0, le=24 * 3600.0)
    remeasure_backoff: float = Field(default=4.0, ge=1, le=100)
    #: A ``running`` job whose runner has sent no heartbeat for this long is requeued by the sweeper
    #: (and a redelivered copy may start). Keep it well above ``heartbeat_seconds`` and below
    #: ``broker_visibility_timeout``.
    runner_lost_seconds: float = Field(default=120.0, gt=0)
    #: A ``queued`` job this old that has no message in its queue (lost by a broker) is requeued.
    queued_lost_seconds: float = Field(default=600.0, gt=0)
    #: Seconds between two sweeps of the control worker's sweeper.
    sweeper_seconds: float = Field(default=30.0, gt=0)
    #: Seconds a runner waits for the control worker's go-ahead (is the job finished, cancelled, or
    #: started too often?), asked while a first delivery is judged, before a job delivered again
    #: starts; without an answer (control worker down) it runs the job and reports it anyway.
    job_gate_seconds: float = Field(default=15.0, gt=0)
    api_host: str = "127.0.0.1"
    api_port: int = 8000
    #: Seconds a browser stays signed in (a server-side web session; sign-out ends it sooner).
    session_max_age_seconds: int = Field(default=14 * 24 * 3600, ge=60)
    #: Largest problem upload (``kernelrank problems push``), in bytes: the archive, and separately
    #: its files unpacked together.
    max_problem_bytes: int = Field(default=8 * 1024 * 1024, ge=64 * 1024)

    # -- hostile clients (``kernelrank.api.edge``, ``kernelrank.api.server``) ---------------------------
    #: Largest request body of every route but the uploads (JSON bodies, sign-in and token forms),
    #: in bytes. Uploads have their own: ``max_code_bytes`` (submissions, with room for JSON
    #: escapes and form fields) and ``max_problem_bytes`` (problem archives).
    max_json_body_bytes: int = Field(default=64 * 1024, ge=4096)
    #: Seconds a connection has to send a complete request head (request line and headers), from
    #: when it opens or its previous response was sent; then the server closes it.
    http_header_timeout_seconds: float = Field(default=10.0, gt=0)
    #: Seconds a request has to send its whole body, from when its head arrived; then it is answered
    #: 408 and its connection closed. 30 s takes a 256 KiB submission at 9 KiB/s.
    http_body_timeout_seconds: float = Field(default=30.0, gt=0)

    # -- limits against abuse and observability (``kernelrank.services.limits``, ``kernelrank.logs``) ---
    #: Submissions a user may make per rolling hour (failed and cancelled ones do not count; see
    #: ``kernelrank.services.limits.COUNTED``); 0 = no limit. Admins are exempt.
    rate_submissions_per_hour: int = Field(default=60, ge=0)
    #: Jobs a user may have queued or running at once; 0 = no limit. Admins are exempt.
    rate_concurrent_jobs: int = Field(default=10, ge=0)
    #: Log lines as JSON objects (one per line) or as plain text.
    log_format: Literal["json", "text"] = "json"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    # -- the command-line client (``kernelrank submit``, ``leaderboard``, ``login``) ------------------
    #: Server URL for client commands; a ``--server`` flag wins, the client config file comes after.
    server: str | None = None
    #: API token for client commands (``--token`` wins, then this, then the client config file).
    token: str | None = Field(default=None, repr=False)
    #: The client config file ``kernelrank login`` writes: ``$XDG_CONFIG_HOME/kernelrank/config.toml``
    #: (``~/.config`` when ``XDG_CONFIG_HOME`` is unset or not absolute).
    client_config: Path = Field(default_factory=lambda: _config_home() / "kernelrank" / "config.toml")

    def resolved_database_url(self) -> str:
        """The database URL, defaulting to SQLite in the data folder."""
        return self.database_url or f"sqlite:///{(self.data_dir / 'kernelrank.db').resolve()}"

    def resolved_broker_url(self) -> str:
        """The broker URL, defaulting to the filesystem transport (no server) in the data folder."""
        return self.broker_url or "filesystem://"

    @property
    def broker_folder(self) -> Path:
        """Message folder of the embedded filesystem broker."""
        return (self.data_dir / "broker").resolve()


@lru_cache
def get_settings() -> Settings:
    """The process's settings, read once (tests call ``get_settings.cache_clear()`` after
    changing the environment)."""
    return Settings()
