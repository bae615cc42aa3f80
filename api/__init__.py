"""The HTTP layer (FastAPI): submissions, problems, leaderboards, runners and accounts.

The JSON API's routes are in :mod:`kernelrank.api.routes`, the HTML pages in
:mod:`kernelrank.api.web`; both are thin callers of :mod:`kernelrank.services` and show models
through :mod:`kernelrank.api.presenters` as the schemas of :mod:`kernelrank.api.schemas`.
:func:`kernelrank.api.app.create_app` puts them together.
"""
