"""The runner's core: the harness that judges and times submitted kernels.

Public entry point: :func:`kernelrank.runner.judge.harness.evaluate`. This package's ``__init__`` stays
empty of imports on purpose: the child process that runs submitted code imports
``kernelrank.runner.submission.child`` and must not load the judge's modules with it.
"""
