"""The host: the runner's self-test (``selftest``), what the host does to timing (``hostprobe``),
the device's roofline ceilings (``ceilings``), GPU facts (``gpuinfo``) and device names
(``devices``). This ``__init__`` imports nothing.
"""
