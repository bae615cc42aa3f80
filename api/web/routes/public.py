"""Pages for everyone: the home overview, a problem with its leaderboards and charts, template
downloads, and the runners."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from kernelrank.api.deps import SessionDep, SettingsDep
from kernelrank.api.web import charts, queries
from kernelrank.api.web.deps import PageUser, render
from kernelrank.format import positive
from kernelrank.db.models import ProblemRevision, User, utcnow
from kernelrank.problems import Case
from kernelrank.services import Invalid, NotFound, leaderboard, problems, queueing, runners, submissions
from kernelrank.vocab import CPU_QUEUE, MODES, CaseKind, device_class

router = APIRouter(include_in_schema=False)

#: Rows shown per leaderboard on a problem page.
BOARD_ROWS = 100
#: Top entries drawn in the per-case chart.
CHART_ENTRIES = 5
#: Window of the runners page's "recent throughput".
THROUGHPUT_WINDOW = dt.timedelta(hours=1)
#: SVG charts come from pygal; when opened directly, no script in them may run.
_SVG_HEADERS = charts.SVG_HEADERS


def visible_revisions(session: Session, user: User | None) -> list[ProblemRevision]:
    """Current revisions of the problems this viewer may see (hidden ones: admins only)."""
    return problems.list_current(session, include_hidden=problems.sees_hidden(user))


def devices_for(served: set[str], ranked: Iterable[str]) -> list[str]:
    """The boards a problem page shows, sorted: ``cpu``, every device ``served`` now, and every
    device with a ranked entry."""
    return sorted({CPU_QUEUE} | served | set(ranked))


def case_label(case: Case) -> str:
    """A case's parameters without its seed, e.g. ``M=4096 N=1024 dtype=float32``."""
    return " ".join(f"{k}={v}" for k, v in case.params.items() if k != "seed")


@router.get("/", response_class=HTMLResponse)
def home(request: Request, session: SessionDep, settings: SettingsDep, user: PageUser):
    """Every problem with, per device, its leader, their score and speedup, and the entrants."""
    revs = visible_revisions(session, user)
    leaders = leaderboard.leaders(session, [r.id for r in revs])
    served = runners.served(session, settings.runner_online_seconds, settings.runner_remember_hours).queues
    rows = []
    for rev in revs:
        boards = devices_for(served, (dev for (rid, dev) in leaders if rid == rev.id))
        rows.append({"rev": rev, "definition": problems.definition(rev), "state": problems.state_of(rev.problem),
                     "deadline": problems.deadline_of(rev.problem),
                     "boards": [(dev, leaders.get((rev.id, dev))) for dev in boards]})
    return render(request, "home.html", user, problems=rows)


@router.get("/problems/{name}", response_class=HTMLResponse)
def problem_page(name: str, request: Request, session: SessionDep, settings: SettingsDep, user: PageUser,
                 revision: str | None = None):
    """Description, data contract, tolerances, cases, templates, and a leaderboard per device, of
    the current revision or of ``?revision=<hash or prefix>`` (each revision keeps its own board)."""
    hidden = problems.sees_hidden(user)
    rev = problems.get_revision(session, name, revision or None, include_hidden=hidden)
    d = problems.definition(rev)
    ranked = leaderboard.boards(session, rev.id, limit=BOARD_ROWS)
    served = runners.served(session, settings.runner_online_seconds, settings.runner_remember_hours).queues
    shown = [{"device": device, "rows": ranked.get(device, []),
              "headline": next((case_label(c) for c in d.benchmarks.get(device_class(device)) or []), "—")}
             for device in devices_for(served, ranked)]
    return render(request, "problem.html", user, rev=rev, d=d, boards=shown, served=sorted(served),
                  state=problems.state_of(rev.problem), deadline=problems.deadline_of(rev.problem),
                  revisions=problems.list_revisions(session, name, include_hidden=hidden),
                  templates_=sorted((rev.templates or {}).keys()), modes=MODES)


@router.get("/problems/{name}/templates/{filename}")
def template_download(name: str, filename: str, session: SessionDep, user: PageUser) -> Response:
    """One of the problem's starting-point files, as a download (looked up by name, never a path)."""
    rev = problems.current_revision(session, name, include_hidden=problems.sees_hidden(user))
    source = (rev.templates or {}).get(filename)
    if source is None:
        raise NotFound(f"problem {name!r} has no template {filename!r}")
    return Response(source, media_type="text/x-python; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{name}_{filename}"'})


def _board_revision(session: Session, name: str, device: str, revision: str | None,
                    user: User | None) -> ProblemRevision:
    """The board's revision (current by default).

    Raises:
        Invalid: not a device queue name, or a malformed revision. NotFound: unknown or hidden problem.
    """
    try:
        device_class(device)
    except ValueError as e:
        raise Invalid(str(e)) from None
    return problems.get_revision(session, name, revision or None, include_hidden=problems.sees_hidden(user))


@router.get("/problems/{name}/charts/{device}/best.svg")
def best_chart(name: str, device: str, session: SessionDep, user: PageUser, revision: str | None = None) -> Response:
    """SVG: the best score of a board over time."""
    rev = _board_revision(session, name, device, revision, user)
    svg = charts.best_score_chart(queries.best_over_time(session, rev.id, device), device)
    return Response(svg, media_type="image/svg+xml", headers=_SVG_HEADERS)


@router.get("/problems/{name}/charts/{device}/cases.svg")
def cases_chart(name: str, device: str, session: SessionDep, user: PageUser, revision: str | None = None) -> Response:
    """SVG: each benchmark case's time (the one the score is built from) with its 95% interval,
    for the board's top entries."""
    rev = _board_revision(session, name, device, revision, user)
    cases = problems.definition(rev).benchmarks.get(device_class(device)) or []
    _, rows = leaderboard.leaderboard(session, name, device, limit=CHART_ENTRIES, revision=rev.revision,
                                      include_hidden=True)
    results = queries.public_results(session, [r.submission_id for r in rows])
    entries = []
    for r in rows:
        times: dict[int, tuple[float, list[float] | None]] = {}
        for case in results.get(r.submission_id, {}).get("cases") or []:
            if isinstance(case, dict) and case.get("kind") == CaseKind.benchmark:
                t = positive(case.get("time_ns")) or positive((case.get("timing") or {}).get("mean_ns"))
                ci = case.get("time_ci_ns")
                low, high = (positive(ci[0]), positive(ci[1])) if isinstance(ci, list) and len(ci) == 2 else (None, None)
                if t:
                    times[case.get("index")] = (t, [low, high] if low and high else None)
        entries.append((r.user, [times.get(i) for i in range(len(cases))]))
    labels = [f"#{i} {case_label(c)}" for i, c in enumerate(cases)]
    return Response(charts.case_times_chart(labels, entries, device), media_type="image/svg+xml",
                    headers=_SVG_HEADERS)


@router.get("/runners", response_class=HTMLResponse)
def runners_page(request: Request, session: SessionDep, settings: SettingsDep, user: PageUser):
    """Devices online, their queue depth, and how many verdicts each gave in the last hour."""
    online = {r.name for r in runners.online(session, settings.runner_online_seconds)}
    every = queries.all_runners(session)
    queued = submissions.queued_counts(session)
    running = queries.running_counts(session)
    done = queries.finished_since(session, utcnow() - THROUGHPUT_WINDOW)
    devices = sorted({r.device for r in every} | set(queued) | set(running) | set(done))
    waits = queueing.queue_waits(session)
    table = [{"device": dev, "online": sum(1 for r in every if r.device == dev and r.name in online),
              "queued": queued.get(dev, 0), "oldest_wait": waits.get(dev), "running": running.get(dev, 0),
              "done": done.get(dev, 0)}
             for dev in devices]
    return render(request, "runners.html", user, devices=table, runners=every, online=online,
                  window_minutes=int(THROUGHPUT_WINDOW.total_seconds() // 60))
