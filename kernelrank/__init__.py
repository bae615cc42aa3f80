"""KernelRank: a self-hosted GPU kernel leaderboard.

Packages: ``kernelrank.runner`` (the harness: judging and timing, folder ``runner/``),
``kernelrank.api`` (the HTTP service, folder ``api/``), ``kernelrank.cli`` (the ``kernelrank``
command), ``kernelrank.problems`` (problem definitions found under ``problems/``).
"""

__version__ = "0.1.0"
