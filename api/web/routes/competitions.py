"""The competition pages: ``/competitions`` (the list) and ``/competitions/{name}`` (boards,
entries, the overall standing and, once final, the re-judged standings with their stability),
calling the same service functions as the JSON API."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from kernelrank.api.deps import SessionDep
from kernelrank.api.web.deps import PageUser, render
from kernelrank.db.models import as_utc
from kernelrank.services import competitions

router = APIRouter(include_in_schema=False)


@router.get("/competitions", response_class=HTMLResponse)
def competitions_page(request: Request, session: SessionDep, user: PageUser):
    """Every competition the viewer may see, the latest start first, with its state."""
    rows = [{"c": c, "state": competitions.state_of(c), "starts_at": as_utc(c.starts_at), "ends_at": as_utc(c.ends_at)}
            for c in competitions.list_competitions(session, user)]
    return render(request, "competitions.html", user, competitions=rows)


@router.get("/competitions/{name}", response_class=HTMLResponse)
def competition_page(name: str, request: Request, session: SessionDep, user: PageUser):
    """One competition: its window, each board's entries and the standings (see
    :func:`kernelrank.services.competitions.standings`)."""
    comp = competitions.get_competition(session, name, user)
    return render(request, "competition.html", user, c=comp, state=competitions.state_of(comp),
                  starts_at=as_utc(comp.starts_at), ends_at=as_utc(comp.ends_at),
                  standings=competitions.standings(session, comp), rule=competitions.STANDING_RULE,
                  board_key=competitions.board_key)
