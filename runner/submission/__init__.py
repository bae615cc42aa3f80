"""The submission's side of the process boundary: the child's loop (``child``), the zygote it is
forked from, its view of the shared slots (``mapping``), its process settings (``steady``) and the
tripwire (``integrity``). Code here shares a process with submitted code: the judge trusts none of
what it reports. This ``__init__`` imports nothing, so the child loads nothing of the judge's.
"""
