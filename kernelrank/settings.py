"""The one settings object: every ``KERNELRANK_*`` environment variable is read here and nowhere else."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

#: The checkout (or install) root that holds ``problems/`` and ``reference_kernels/``.
PROJECT_ROOT = Path(__file__).resolve().parent.parent


class Settings(BaseSettings):
    """Settings from ``KERNELRANK_<FIELD>`` environment variables (pydantic-settings)."""

    model_config = SettingsConfigDict(env_prefix="KERNELRANK_", extra="ignore")

    problems_dir: Path = PROJECT_ROOT / "problems"
    reference_kernels_dir: Path = PROJECT_ROOT / "reference_kernels"
    #: Reference timings (speedup denominators) and other derived, safe-to-delete data.
    cache_dir: Path = Field(default_factory=lambda: Path(os.path.expanduser("~/.cache/kernelrank")))
    #: Parent folder of the per-evaluation working folders given to submitted code.
    scratch_dir: Path | None = None
    #: Intra-op threads for submitted code and the reference on the CPU device; 0 = all cores.
    cpu_threads: int = Field(default=0, ge=0)
    #: Bytes of the submission's stdout and of its stderr kept as logs (head and tail halves).
    log_limit_bytes: int = Field(default=64 * 1024, ge=1024)


@lru_cache
def get_settings() -> Settings:
    """The process's settings, read once (tests call ``get_settings.cache_clear()`` after
    changing the environment)."""
    return Settings()
