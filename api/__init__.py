"""The HTTP service (FastAPI): submissions, problems, leaderboards and runners.

Routes and the service layer arrive with the service issue; the harness in
``kernelrank.runner`` is usable on its own through ``kernelrank eval``.
"""
