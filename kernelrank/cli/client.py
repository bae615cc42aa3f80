"""Client commands that talk to a KernelRank server over its HTTP API: ``submit``, ``cancel``,
``leaderboard`` and ``login`` (``submissions`` and ``problems list | show``: :mod:`kernelrank.cli.browse`).

Server and token come from, in order: the ``--server`` / ``--token`` flags, the settings
(``KERNELRANK_SERVER`` / ``KERNELRANK_TOKEN``), the client config file ``kernelrank login`` writes
(:attr:`~kernelrank.settings.Settings.client_config`); the server defaults to :data:`DEFAULT_SERVER`.
The token is sent only as an ``Authorization`` header and never printed (at most a masked prefix).

Exit status: 0 when the submission passed (or the command succeeded), 1 for any other verdict (or
when ``--timeout`` ran out first), 2 for a usage error (unreadable file, bad config, the server
refused the request with a 4xx: its ``detail`` is shown), 3 when the server cannot be reached or
fails (5xx, not a KernelRank API).

Nothing heavy is imported here at module level: ``httpx``, ``rich`` and the result types load
inside the commands.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Optional

import typer

from kernelrank import vocab
from kernelrank.cli.views import Progress, leaderboard_table, status_style, submission_view

if TYPE_CHECKING:
    import httpx
    from rich.console import Console

    from kernelrank.runner.results import EvalResult

DEFAULT_SERVER = "http://127.0.0.1:8000"
#: Seconds for one HTTP request (connect, read, write).
REQUEST_TIMEOUT_S = 30.0
#: Consecutive failed polls (server unreachable) tolerated while waiting for a verdict.
POLL_RETRIES = 5


class ClientError(Exception):
    """A failed client command: ``message`` for stderr, ``exit_code`` 2 (usage) or 3 (server)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


# -- configuration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where client commands go and with what credentials."""

    server: str
    token: str | None

    def __repr__(self) -> str:  # never the token itself
        return f"Target(server={self.server!r}, token={mask_token(self.token)!r})"


def mask_token(token: str | None) -> str:
    """A token reduced to a recognisable prefix (``kr_AbCd…``), or ``-``."""
    return "-" if not token else token[:7] + "…"


def config_path() -> Path:
    """The client config file (``$XDG_CONFIG_HOME/kernelrank/config.toml`` by default)."""
    from kernelrank.settings import get_settings

    return get_settings().client_config


def read_config(path: Path | None = None) -> dict[str, str]:
    """The client config file's ``server`` and ``token`` (missing keys absent; no file: ``{}``).

    Raises:
        ClientError: (exit 2) the file exists but is unreadable or not valid TOML.
    """
    import tomllib

    path = path or config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        raise ClientError(f"cannot read the client config {path}: {e}", 2) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ClientError(f"the client config {path} is not valid TOML: {e}", 2) from None
    return {k: data[k] for k in ("server", "token") if isinstance(data.get(k), str) and data[k]}


def _toml_string(value: str) -> str:
    # JSON string escapes (\" \\ \n \t \uXXXX ...) are valid TOML basic-string escapes; non-ASCII
    # stays literal (UTF-8), so no surrogate-pair escapes (invalid in TOML) are produced.
    return json.dumps(value, ensure_ascii=False)


def write_config(server: str, token: str, path: Path | None = None) -> Path:
    """Write ``server`` and ``token`` to the client config file, readable by its owner only
    (file mode 0600, folder 0700 when created), replacing it atomically. Returns the path.

    Raises:
        ClientError: (exit 2) the file or its folder cannot be written.
    """
    path = path or config_path()
    text = (
        "# Written by `kernelrank login`. Holds an API token: keep it private (mode 0600).\n"
        f"server = {_toml_string(server)}\n"
        f"token = {_toml_string(token)}\n"
    )
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # O_CREAT's mode is filtered by the umask; this is not
            os.write(fd, text.encode("utf-8"))
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ClientError(f"cannot write the client config {path}: {e}", 2) from None
    return path


def resolve_target(server: str | None, token: str | None) -> Target:
    """Server and token: the flag, else the settings (environment), else the config file; the
    server defaults to :data:`DEFAULT_SERVER`, the token to none.

    Raises:
        ClientError: (exit 2) a broken config file (read only when a flag or setting is missing),
            or a server that is not an http(s) URL.
    """
    from kernelrank.settings import get_settings

    settings = get_settings()
    server = server or settings.server
    token = token or settings.token
    if not server or not token:
        config = read_config(settings.client_config)
        server = server or config.get("server")
        token = token or config.get("token")
    server = (server or DEFAULT_SERVER).strip().rstrip("/")
    if not server.startswith(("http://", "https://")):
        raise ClientError(f"server {server!r} is not an http:// or https:// URL", 2)
    return Target(server, token.strip() if token else None)


# -- HTTP ---------------------------------------------------------------------------------------


def _detail(response: "httpx.Response") -> str:
    """The server's ``detail`` message (FastAPI's shape), else the response text."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list):  # request validation errors: [{loc, msg, ...}]
        parts = []
        for err in detail:
            if isinstance(err, dict):
                loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
                parts.append(f"{loc}: {err.get('msg', '')}" if loc else str(err.get("msg", "")))
            else:
                parts.append(str(err))
        return "; ".join(parts)
    return json.dumps(body)[:500]


class ApiClient:
    """A thin synchronous client of ``/api/v1``: JSON in, JSON out, failures as :class:`ClientError`."""

    def __init__(self, target: Target, timeout_s: float = REQUEST_TIMEOUT_S):
        import httpx

        self.target = target
        headers = {"Accept": "application/json", "User-Agent": "kernelrank-cli"}
        if target.token:
            headers["Authorization"] = f"Bearer {target.token}"
        self._http = httpx.Client(base_url=target.server, headers=headers, timeout=timeout_s)

    def __enter__(self) -> "ApiClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """``method`` ``/api/v1{path}``; the decoded JSON body (``None`` for 204 No Content).

        Raises:
            ClientError: exit 3 when the server cannot be reached, answers 5xx or not with JSON;
                exit 2 for a 4xx (with the server's ``detail``).
        """
        response = self._send(method, path, **kwargs)
        self._raise_for(response)
        if response.status_code == 204:  # No Content (a revocation)
            return None
        return self._json(response, method, path)

    def read_if_changed(self, path: str, etag: str | None, wait_s: float) -> tuple[Any, str | None]:
        """GET ``/api/v1{path}`` unless it still has ``etag``, waiting up to ``wait_s`` seconds on
        the server for it to change: ``(body, its ETag)``, or ``(None, etag)`` when unchanged (304).
        A server without ETags answers at once: ``(body, None)``.

        Raises:
            ClientError: as :meth:`request`.
        """
        headers = {"If-None-Match": etag} if etag else {}
        params = {"wait": f"{wait_s:g}"} if etag and wait_s > 0 else {}
        response = self._send("GET", path, headers=headers, params=params,
                              timeout=self._http.timeout.read + wait_s if self._http.timeout.read else None)
        if response.status_code == 304:
            return None, response.headers.get("ETag", etag)
        self._raise_for(response)
        return self._json(response, "GET", path), response.headers.get("ETag")

    def _send(self, method: str, path: str, **kwargs: Any) -> Any:
        """``method`` ``/api/v1{path}``: the response, whatever its status.

        Raises:
            ClientError: exit 3 when the server cannot be reached.
        """
        import httpx

        try:
            return self._http.request(method, f"/api/v1{path}", **kwargs)
        except httpx.TransportError as e:
            raise ClientError(f"cannot reach the server at {self.target.server}: {e.__class__.__name__}: {e}", 3) from None

    def _raise_for(self, response: Any) -> None:
        """Raises :class:`ClientError` for a 5xx (exit 3) or a 4xx (exit 2, with the ``detail``)."""
        if response.status_code >= 500:
            raise ClientError(f"the server at {self.target.server} failed ({response.status_code}): "
                              f"{_detail(response)}", 3)
        if response.status_code >= 400:
            message = f"{_detail(response)} (HTTP {response.status_code})"
            if response.status_code == 401:
                message += ("; no API token given: pass --token, set KERNELRANK_TOKEN or run `kernelrank login`"
                            if not self.target.token else "; the API token was refused")
            raise ClientError(message, 2)

    def _json(self, response: Any, method: str, path: str) -> Any:
        try:
            return response.json()
        except ValueError:
            raise ClientError(f"{self.target.server} answered {method} {path} with something other than JSON: "
                              "is it a KernelRank server?", 3) from None


# -- rendering ----------------------------------------------------------------------------------


# -- commands -----------------------------------------------------------------------------------


def fail(e: ClientError) -> typer.Exit:
    from kernelrank.cli.render import make_console

    make_console(stderr=True).print(f"[red]error:[/] {e.message}", markup=True, soft_wrap=True)
    return typer.Exit(e.exit_code)


ServerOpt = Annotated[Optional[str], typer.Option(
    "--server", help="Server URL (default: KERNELRANK_SERVER, the login config, http://127.0.0.1:8000).")]
TokenOpt = Annotated[Optional[str], typer.Option(
    "--token", help="API token (default: KERNELRANK_TOKEN, then the login config).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print exactly one JSON object on stdout.")]


def submit_command(
    problem: Annotated[str, typer.Argument(help="Problem name (see GET /api/v1/problems).")],
    file: Annotated[Path, typer.Argument(help="Submission: a Python file defining custom_kernel(data).")],
    device: Annotated[str, typer.Option(help="Device queue: cpu, or cuda-<model> (e.g. cuda-h100).")] = vocab.CPU_QUEUE,
    mode: Annotated[str, typer.Option(help=" | ".join(vocab.MODES) + ".")] = vocab.Mode.leaderboard.value,
    server: ServerOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
    timeout: Annotated[float, typer.Option(
        "--timeout", help="Seconds to wait for the verdict before giving up (exit 1; the job goes on).", min=1)] = 3600.0,
) -> None:
    """Send FILE to the server to be judged on PROBLEM, wait for the verdict and show it."""
    from rich.markup import escape

    from kernelrank.cli.render import make_console

    try:
        vocab.parse_mode(mode)
    except ValueError as e:
        raise fail(ClientError(str(e), 2)) from None
    if not vocab.is_device_queue(device):
        hint = " (the service names the GPU model: cuda-<model>, e.g. cuda-h100)" if device == vocab.LOCAL_CUDA else ""
        raise fail(ClientError(f"--device {device!r} is not a device queue: cpu or cuda-<model>{hint}", 2))
    try:
        raw = file.read_bytes()
    except OSError as e:
        raise fail(ClientError(f"cannot read {file}: {e.strerror or e}", 2)) from None
    sub_id: int | None = None
    try:
        target = resolve_target(server, token)
        with ApiClient(target) as api:
            created = api.request("POST", "/submissions",
                                  data={"problem": problem, "device": device, "mode": mode},
                                  files={"file": (file.name, raw, "text/x-python")})
            new_id = created.get("id") if isinstance(created, dict) else None
            if not isinstance(new_id, int):
                raise ClientError(f"unexpected answer to the submission: {json.dumps(created)[:300]}", 3)
            sub_id = new_id
            err = make_console(stderr=True)
            if created.get("message") and not as_json:
                err.print(f"[yellow]note:[/] {escape(str(created['message']))}")
            sub = follow(api, sub_id, timeout, err, None if as_json else (
                f"submitted {file.name} to {problem} on {device} ({mode}): submission #{sub_id}",
                f"submission #{sub_id}: queued"))
    except ClientError as e:
        raise fail(e) from None
    except KeyboardInterrupt:
        if sub_id is None:
            raise
        make_console(stderr=True).print(f"stopped waiting: submission #{sub_id} goes on "
                                        f"(GET {target.server}/api/v1/submissions/{sub_id})")
        raise typer.Exit(130) from None
    show_verdict(sub, timeout, as_json, err, f"GET {target.server}/api/v1/submissions/{sub_id}")


def follow(api: ApiClient, sub_id: int, timeout_s: float, err: Any, announce: tuple[str, str] | None) -> dict[str, Any]:
    """:func:`wait_for` the submission; with ``announce`` (a line to print first, the spinner's
    label) showing progress on ``err`` (a stderr console), without it (``--json``) silently."""
    if announce is None:
        return wait_for(api, sub_id, timeout_s, None)
    line, label = announce
    err.print(line)
    with err.status(label) as status:
        return wait_for(api, sub_id, timeout_s, Progress(err, status))


def show_verdict(sub: dict[str, Any], timeout_s: float, as_json: bool, err: Any, again: str) -> NoReturn:
    """Print a followed submission (one JSON object, or its view), say on ``err`` when waiting
    gave up before the verdict (``again``: how to look later), and exit: 0 only when it passed,
    else 1."""
    from kernelrank.cli.render import make_console

    if as_json:
        typer.echo(json.dumps(sub, allow_nan=False, default=str))
    else:
        make_console().print(submission_view(sub))
    if sub.get("status") not in vocab.FINAL_STATUSES:
        err.print(f"[yellow]gave up after {timeout_s:g} s:[/] submission #{sub.get('id')} is still "
                  f"{sub.get('status')}; it goes on ({again})")
    raise typer.Exit(0 if sub.get("status") == vocab.Verdict.passed else 1)


#: Seconds each read of a followed submission waits on the server for its state to change
#: (``GET /submissions/{id}?wait=`` with ``If-None-Match``): a change shows at once, and the
#: progress view's clock moves at least this often.
FOLLOW_WAIT_S = 1.0


def wait_for(api: ApiClient, sub_id: int, timeout_s: float, progress: Progress | None) -> dict[str, Any]:
    """Follow the submission until it has a final status or ``timeout_s`` passed: each read waits
    on the server up to :data:`FOLLOW_WAIT_S` for its state to change (a long-poll on its
    ``ETag``); a server that sends no ``ETag`` is polled every 0.5 s, then every 1 s after 10 s.
    Tolerates up to :data:`POLL_RETRIES` consecutive unreachable reads.

    Raises:
        ClientError: the server stayed unreachable (exit 3) or refused the request (exit 2).
    """
    start = time.monotonic()
    failures = 0
    etag: str | None = None
    got: dict[str, Any] | None = None
    sub: dict[str, Any] = {"id": sub_id, "status": vocab.SubmissionStatus.queued.value}
    while True:
        waited = time.monotonic() - start
        sent = etag
        try:
            wait = min(FOLLOW_WAIT_S, max(0.0, timeout_s - waited)) if etag else 0.0
            got, etag = api.read_if_changed(f"/submissions/{sub_id}", etag, wait)
            failures = 0
        except ClientError as e:
            failures += 1
            if e.exit_code != 3 or failures > POLL_RETRIES:
                e.message += f" (submission #{sub_id} was accepted and goes on)"
                raise
        else:
            sub = got if got is not None else sub
            if progress is not None:
                progress.update(sub, waited)
            if sub.get("status") in vocab.FINAL_STATUSES:
                return sub
        if waited >= timeout_s:
            return sub
        if failures or etag is None or (got is not None and etag == sent):  # no long-poll here: poll
            time.sleep(0.5 if waited < 10 else 1.0)


def leaderboard_command(
    problem: Annotated[str, typer.Argument(help="Problem name.")],
    device: Annotated[str, typer.Option(help="Device queue: cpu, or cuda-<model>.")] = vocab.CPU_QUEUE,
    revision: Annotated[Optional[str], typer.Option(
        help="An earlier revision's board: its hash or a 6+ digit prefix (default: the current revision).")] = None,
    server: ServerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The ranked entries of PROBLEM on DEVICE, best first."""
    from kernelrank.cli.render import make_console

    try:
        target = resolve_target(server, None)
        with ApiClient(Target(target.server, None)) as api:  # public: no token sent
            board = api.request("GET", f"/leaderboards/{path_segment(problem)}/{path_segment(device)}",
                                params={"revision": revision} if revision else None)
    except ClientError as e:
        raise fail(e) from None
    if as_json:
        typer.echo(json.dumps(board, allow_nan=False, default=str))
        return
    console = make_console()
    console.print(leaderboard_table(board))
    if not board.get("rows"):
        console.print("no ranked submissions yet")


def cancel_command(
    submission: Annotated[int, typer.Argument(help="Submission id (as `submit` printed it).", min=1)],
    server: ServerOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Cancel one of your queued submissions (admins: anyone's); a running or finished one cannot be."""
    from kernelrank.cli.render import make_console

    try:
        target = resolve_target(server, token)
        with ApiClient(target) as api:
            sub = api.request("POST", f"/submissions/{submission}/cancel")
    except ClientError as e:
        raise fail(e) from None
    if as_json:
        typer.echo(json.dumps(sub, allow_nan=False, default=str))
    else:
        make_console().print(f"submission #{sub.get('id')}: [{status_style(sub.get('status'))}]{sub.get('status')}[/]")


def path_segment(value: str) -> str:
    """A URL path segment (so ``a/b`` cannot reach another route)."""
    from urllib.parse import quote

    return quote(value, safe="")


def login_command(
    server: ServerOpt = None,
    token: TokenOpt = None,
    user: Annotated[Optional[str], typer.Option(
        "--user", help="Sign in with this user's password instead: a new API token is made and saved.")] = None,
    password_stdin: Annotated[bool, typer.Option(
        "--password-stdin", help="With --user: read the password from stdin's first line instead of asking.")] = False,
) -> None:
    """Check an API token with the server and save it for later commands; or, with --user, sign
    in with a password and save the new API token it gives.

    Server and token go to the client config file (mode 0600), used when no flag or environment
    variable gives them."""
    from kernelrank.cli.render import make_console

    try:
        target = resolve_target(server, token)
        if user is not None:
            target = Target(target.server, _password_token(target, user, password_stdin))
        elif not target.token:
            if not sys.stdin.isatty():
                raise ClientError("no API token: pass --token, set KERNELRANK_TOKEN, or run this in a terminal "
                                  "to be asked for it", 2)
            target = Target(target.server, typer.prompt("API token", hide_input=True).strip())
        with ApiClient(target) as api:
            me = api.request("GET", "/me")
        path = write_config(target.server, target.token or "")
    except ClientError as e:
        raise fail(e) from None
    name = me.get("name") if isinstance(me, dict) else None
    role = " (admin)" if isinstance(me, dict) and me.get("is_admin") else ""
    make_console().print(f"logged in to {target.server} as {name}{role}; token {mask_token(target.token)} "
                         f"saved to {path}")


def _password_token(target: Target, user: str, from_stdin: bool) -> str:
    """A new API token for ``user``, from their password (``POST /auth/token``).

    Raises:
        ClientError: no password to read (exit 2), refused (exit 2), server failure (exit 3).
    """
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif sys.stdin.isatty():
        password = typer.prompt(f"Password of {user}", hide_input=True)
    else:
        raise ClientError("no terminal to ask for the password: use --password-stdin", 2)
    with ApiClient(Target(target.server, None)) as api:
        answer = api.request("POST", "/auth/token",
                             json={"name": user, "password": password, "token_name": "kernelrank login"})
    token = answer.get("token") if isinstance(answer, dict) else None
    if not isinstance(token, str):
        raise ClientError("unexpected answer to the password sign-in", 3)
    return token


def register(app: typer.Typer) -> None:
    """Add ``submit``, ``cancel``, ``leaderboard`` and ``login`` to the ``kernelrank`` app."""
    app.command("submit")(submit_command)
    app.command("cancel")(cancel_command)
    app.command("leaderboard")(leaderboard_command)
    app.command("login")(login_command)


# the older private names, which other command modules import
