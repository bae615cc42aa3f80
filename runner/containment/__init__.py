"""Containment: the judge's handle on a child (``sandbox``), the isolation plan and its entry in
the child (``isolation``, ``isolation_check``), per-job cgroups, resource limits (``rlimits``), the
job's own disk (``jobdisk``), ``/proc`` reads (``procfs``) and the precompiled header (``pch``).

``isolation.enter`` and ``rlimits`` also run in the child, before any submitted code. This
``__init__`` imports nothing.
"""
