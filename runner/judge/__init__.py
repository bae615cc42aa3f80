"""The judge's side: one evaluation per mode (``harness.evaluate``), the timed phase, input sets,
pairs and requests, reading and checking outputs, and the rules that turn claims into times.

Nothing here runs inside the submission's process. This ``__init__`` imports nothing.
"""
