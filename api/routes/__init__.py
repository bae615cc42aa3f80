"""One router per resource, each calling the service layer (``kernelrank.services``)."""

from kernelrank.api.routes import admin, competitions, health, leaderboards, problems, runners, submissions, users

#: Every JSON API router, in the order they appear in the OpenAPI document.
routers = [problems.router, submissions.router, leaderboards.router, competitions.router, runners.router, users.router,
           admin.router, competitions.admin_router, health.router]

__all__ = ["routers"]
