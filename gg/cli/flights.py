"""``gg fly``, ``gg flights``, ``gg show``, ``gg cancel``."""

from __future__ import annotations

import shlex
import sys
import time
from typing import TYPE_CHECKING, Any, List, Optional

import typer

from gg.cli import fly_bodies
from gg.cli.context import (
    CliError,
    ago,
    client,
    console,
    emit_json,
    parse_labels,
    state,
    table,
    words,
)
from gg.cli.exits import Exit
from gg.client import RETRY_FOLLOW, WAITING_POLL
from gg.domain.flight_spec import note_problem
from gg.domain.flights import Priority, Stage
from gg.domain.timeouts import describe as describe_duration
from gg.settings import parse_size

if TYPE_CHECKING:
    from gg.api.flights import FactsPage, FlightFact

STAGES = tuple(s.value for s in Stage)
PRIORITIES = tuple(p.value for p in Priority)


def register(app: typer.Typer) -> None:
    app.command("fly", context_settings={"allow_interspersed_args": False})(fly)
    app.command("flights")(list_flights)
    app.command("show")(show)
    app.command("cancel")(cancel)
    app.command("rerun")(rerun)


def fly(
    command: List[str] = typer.Argument(None, metavar="-- CMD...", help="The command to run."),
    env: Optional[str] = typer.Option(None, "--env", metavar="NAME", help="Environment to fly in."),
    runner: Optional[str] = typer.Option(None, "--runner", metavar="R", help="Only this runner."),
    labels: Optional[str] = typer.Option(None, "--labels", metavar="k=v,...", help="Labels required."),
    title: str = typer.Option("", "--title", metavar="T"),
    attended: bool = typer.Option(False, "--attended", help="Fail unless R takes it promptly."),
    repo: Optional[str] = typer.Option(None, "--repo", metavar="URL"),
    agent: str = typer.Option("shell", "--agent", metavar="NAME"),
    priority: str = typer.Option("normal", "--priority", metavar="P", help="|".join(PRIORITIES)),
    wait: bool = typer.Option(False, "--wait", help="Follow it to the end; exit with its code."),
    json_: bool = typer.Option(False, "--json"),
    timeout: Optional[str] = typer.Option(None, "--timeout", metavar="DUR",
                                          help="Stop it and fail it past this (30s, 10m, 2h)."),
    output_limit: Optional[str] = typer.Option(None, "--output-limit", metavar="SIZE",
                                               help="Output kept at most (512k, 10MB)."),
    approval: bool = typer.Option(False, "--approval",
                                  help="Hold it until an admin (or --approver) approves it."),
    approver: Optional[str] = typer.Option(None, "--approver", metavar="PERSON",
                                           help="Who besides an admin may approve it."),
    service: bool = typer.Option(False, "--service", help="Keep it running (docs/services.md)."),
    port: Optional[int] = typer.Option(None, "--port", metavar="P",
                                       help="Service: the runner listens on P and forwards."),
    ready_cmd: Optional[str] = typer.Option(None, "--ready-cmd", metavar="CMD",
                                            help="Service: ready when CMD exits 0."),
    socket_activation: bool = typer.Option(
        False, "--socket-activation",
        help="Service: the runner listens on $PORT before each generation starts and hands "
             "it the socket as fd 3 (LISTEN_FDS)."),
    group: Optional[str] = typer.Option(None, "--group", metavar="G",
                                        help="Only runners of group G."),
    where: Optional[str] = typer.Option(None, "--where", metavar="k=v,...",
                                        help="Attributes the runner's group must have."),
    concurrency: Optional[str] = typer.Option(
        None, "--concurrency", metavar="KEY[:N]",
        help="At most N (1) flights with KEY fly at once, fleet-wide."),
    cancel_in_progress: bool = typer.Option(
        False, "--cancel-in-progress",
        help="With --concurrency: cancel the older flights of KEY not ended yet."),
    grace: Optional[str] = typer.Option(
        None, "--grace", metavar="DUR",
        help="Time between SIGTERM and SIGKILL when stopped (default 5s, at most 10m)."),
    after: Optional[str] = typer.Option(None, "--after", metavar="F1,F2",
                                        help="Start only once these flights have landed."),
    after_any: bool = typer.Option(False, "--after-any",
                                   help="With --after: once they have ended in any way."),
    cpus: Optional[str] = typer.Option(None, "--cpus", metavar="N",
                                       help="Cores it may use at most (0.5, 1.5)."),
    memory: Optional[str] = typer.Option(None, "--memory", metavar="SIZE",
                                         help="Memory it may use; past it it is killed (512M)."),
    pids: Optional[str] = typer.Option(None, "--pids", metavar="N",
                                       help="Processes it may have at once."),
    note: Optional[str] = typer.Option(None, "--note", metavar="TEXT",
                                       help="Free text for people, shown with the flight."),
    file: Optional[str] = typer.Option(
        None, "--file", metavar="FLIGHTS.yaml",
        help="Open the flights of a file (flights: NAME: {command, needs, ...}), all or none."),
    secret: list[str] = typer.Option(
        [], "--secret", metavar="NAME[=ENVVAR]",
        help="Put secret NAME in $ENVVAR (default $NAME); repeatable (docs/jobs.md)."),
    retries: Optional[int] = typer.Option(None, "--retries", metavar="N",
                                          help="Try it again up to N times (0-10) if it fails."),
    retry_on: Optional[str] = typer.Option(None, "--retry-on", metavar="failed,timed-out",
                                           help="Which endings are retried (default failed)."),
    retry_delay: Optional[str] = typer.Option(None, "--retry-delay", metavar="DUR",
                                              help="Offer each retry only after DUR."),
    retry_elsewhere: bool = typer.Option(False, "--retry-elsewhere",
                                         help="Retry on another runner while one could take it."),
    with_artifacts: bool = typer.Option(
        False, "--with-artifacts",
        help="With --after: their artifacts under $GG_INPUTS/<name or id>/ before it starts."),
    artifact_limit: Optional[str] = typer.Option(
        None, "--artifact-limit", metavar="SIZE",
        help="Its artifacts ($GG_ARTIFACTS) may take this much (default 1G)."),
) -> None:
    """Open a flight."""
    if file is not None or not command:  # gg fly --file: docs/work-graphs.md
        from gg.cli.flights_file import fly_file

        return fly_file(file, command, json_)
    if priority not in PRIORITIES:
        raise CliError(f"--priority must be one of {', '.join(PRIORITIES)} (got {priority!r})",
                       Exit.USAGE)
    body: dict[str, Any]  # the request's fields, of their several types
    body = {"command": command, "title": title, "environment": env, "runner": runner,
            "labels": parse_labels(labels), "attended": attended, "repo": repo, "agent": agent,
            "priority": priority, "group": group, "where": _pairs("--where", where)}
    if (port is not None or ready_cmd is not None or socket_activation) and not service:
        raise CliError("--port, --ready-cmd and --socket-activation are for a service: add "
                       "--service", Exit.USAGE)
    if service:
        body["service"] = {"port": port, "ready_cmd": ready_cmd}
        if socket_activation:
            body["service"]["socket_activation"] = True
    if approval or approver is not None:
        body["approval"] = True
    if approver is not None:
        body["approver"] = approver
    if after is not None or after_any:  # docs/work-graphs.md
        body["after"] = [f for f in (after or "").replace(" ", "").split(",") if f]
        body["after_any"] = after_any
    if timeout is not None:
        body["timeout"] = _duration("--timeout", timeout)
    if output_limit is not None:
        body["output_limit"] = _size("--output-limit", output_limit)
    body.update(_job_contract(concurrency, cancel_in_progress, grace))
    if secret:  # --secret NAME[=ENVVAR]: names only; values go with the grant
        from gg.domain.secrets import Use

        try:
            body["secrets"] = [Use.parse(s).to_wire() for s in secret]
        except ValueError as exc:
            raise CliError(str(exc), Exit.USAGE) from None
    retry = _retry(retries, retry_on, retry_delay, retry_elsewhere)  # docs/jobs.md
    if retry is not None:
        body["retry"] = retry
    if cpus is not None or memory is not None or pids is not None:
        from gg.cli.limits import parse_limits

        body["limits"] = parse_limits(cpus=cpus, memory=memory, pids=pids)
    if note is not None:
        if problem := note_problem(note):
            raise CliError(problem, Exit.USAGE)
        body["note"] = note
    if with_artifacts or artifact_limit is not None:  # docs/work-graphs.md, "Artifacts"
        body["artifacts"] = {"inputs": with_artifacts, "limit": (
            _size("--artifact-limit", artifact_limit) if artifact_limit is not None else None)}
    if fly_bodies.taken(body):  # a flight of gg fly --file, parsed
        return None
    api = client()
    # the answers are only printed: read as sent, with no wire model (gg fly stays quick)
    flight = api.open_flight(body, plain=True)
    if json_ and not wait:
        emit_json(flight)
        return
    if not wait:
        typer.echo(flight.id)
        if flight.stage in (Stage.READY, Stage.GATED):  # the answer is the bare row
            waiting = api.flight(flight.id, plain=True).waiting
            if waiting:
                typer.echo(waiting, err=True)
        return
    print(f"{flight.id} opened", file=sys.stderr, flush=True)
    # the answer to an open is the bare row (opening a burst stays cheap): why it waits and
    # when it is expected to start are asked for once, then again as they move
    waiting = flight.stage in (Stage.READY, Stage.GATED)
    final = follow(api, flight.id, echo=not json_,
                   opened=api.flight(flight.id, plain=True) if waiting else flight)
    if json_:
        emit_json(api.flight(flight.id, plain=True))
    raise typer.Exit(exit_code_of(final, api if not json_ else None))


def _job_contract(concurrency: str | None, cancel_in_progress: bool,
                  grace: str | None) -> dict:
    """``--concurrency``, ``--cancel-in-progress`` and ``--grace`` as the open's body has them
    (docs/jobs.md); a bad one is refused here with the domain's sentence."""
    from gg.domain import concurrency as rules

    out: dict = {}
    if cancel_in_progress and concurrency is None:
        raise CliError("--cancel-in-progress needs --concurrency KEY", Exit.USAGE)
    if concurrency is not None:
        try:
            out["concurrency"] = rules.parse(concurrency, cancel_in_progress).to_wire()
        except ValueError as exc:
            raise CliError(str(exc), Exit.USAGE) from None
    if grace is not None:
        out["grace"] = _duration("--grace", grace)
        if problem := rules.grace_problem(out["grace"]):
            raise CliError(problem, Exit.USAGE)
    return out


def _retry(retries: int | None, on: str | None, delay: str | None,
           elsewhere: bool) -> dict | None:
    """``--retries --retry-on --retry-delay --retry-elsewhere`` as the open's body has them
    (None: none said, the environment's default holds); a bad one gets the domain's sentence."""
    if retries is None and on is None and delay is None and not elsewhere:
        return None
    from gg.domain.retries import Retry, parse_on

    value = Retry(retries=retries, on=parse_on(on) if on is not None else None,
                  delay=_duration("--retry-delay", delay) if delay is not None else None,
                  elsewhere=True if elsewhere else None)
    if problem := value.problem():
        raise CliError(problem, Exit.USAGE)
    return value.to_wire()


def _pairs(flag: str, text: str | None) -> dict[str, str]:
    if not text:
        return {}  # the usual case: no need to load the groups' parser
    from gg.cli.groups import parse_pairs

    return parse_pairs(flag, text)


def _duration(flag: str, text: str) -> float:
    from gg.settings import parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise CliError(f"{flag}: {exc}", Exit.USAGE) from None
    if not seconds > 0:
        raise CliError(f"{flag} must be longer than 0s (got {text!r})", Exit.USAGE)
    return seconds


def _size(option: str, text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise CliError(f"{option}: {exc}", Exit.USAGE) from None


def follow(api, flight_id: str, *, echo: bool = True, after: int = 0,
           opened=None) -> FactsPage:
    """Stream a flight's output until it ends; returns the last answer. While it waits, why
    it waits and when it is expected to start are printed, and printed again as they move."""
    said_waiting = said_estimate = None
    waiting_now = opened is not None and opened.stage in (Stage.READY, Stage.GATED)
    if waiting_now and echo:
        said_waiting, said_estimate = _say(opened, None, None)
    while True:
        # while it waits, look again sooner: the estimate is printed again when it moves
        answer = api.facts(flight_id, after=after, wait=WAITING_POLL if waiting_now else 25.0,
                           retry_for=RETRY_FOLLOW, plain=True)
        for fact in answer.facts:
            after = fact.seq
            if echo:
                _echo_fact(fact)
        if Stage(answer.stage).final and not answer.facts:
            return answer
        waiting_now = answer.stage in (Stage.READY, Stage.GATED)
        if waiting_now and not answer.facts and echo:
            said_waiting, said_estimate = _say(api.flight(flight_id, plain=True), said_waiting,
                                               said_estimate)


def _say(shown, said_waiting: str | None, said_estimate: str | None) -> tuple:
    """Print why ``shown`` waits and when it is expected to start, each only when it changed."""
    if shown.waiting and shown.waiting != said_waiting:
        print(shown.waiting, file=sys.stderr, flush=True)
        said_waiting = shown.waiting
    if shown.expected_start and shown.expected_start != said_estimate:
        print(shown.expected_start, file=sys.stderr, flush=True)
        said_estimate = shown.expected_start
    return said_waiting, said_estimate


class _Line:
    """Whether the output shown so far ends inside a line: a note then starts on a line of its
    own (stdout and stderr share the terminal; a note glued to the last line read as output)."""

    open = False


def _note_line() -> None:
    """End the open line on stderr, so stdout stays exactly what the flight printed."""
    if _Line.open:
        sys.stderr.write("\n")
        _Line.open = False


def _echo_fact(fact: FlightFact) -> None:
    body = fact.body
    if fact.kind == "output":
        text = body.get("text", "")
        sys.stdout.write(text)
        sys.stdout.flush()
        if text:
            _Line.open = not text.endswith("\n")
        return
    _note_line()
    if fact.kind == "expired":
        print(f"-- lease expired (runner {body.get('runner')}); the flight goes back to ready",
              file=sys.stderr, flush=True)
    elif fact.kind == "returned":
        print(f"-- returned by its runner: {body.get('reason') or 'no reason given'}",
              file=sys.stderr, flush=True)
    elif fact.kind == "exit" and body.get("retry"):
        print(f"-- {body['retry']}; the flight goes back to ready", file=sys.stderr, flush=True)
    elif fact.kind == "note" and (fact.runner_id is None or "truncated_after" in body):
        print(f"-- {body.get('text', '')}", file=sys.stderr, flush=True)


def exit_code_of(answer: FactsPage, api=None) -> int:
    """The followed flight's exit code; a flight that did not land is explained on stderr
    (with ``api``: the domain's reason and remedy)."""
    if answer.stage == Stage.LANDED:
        return int(Exit.OK)
    ended = api.flight(answer.flight, plain=True) if api is not None else None
    if ended is not None and ended.ended:
        print(f"{answer.flight} {answer.stage}: {ended.ended}", file=sys.stderr)
        print(f"remedy: {ended.remedy}", file=sys.stderr)
    else:
        print(f"the flight was {answer.stage}", file=sys.stderr)
    if answer.stage == Stage.FAILED:
        code = answer.exit_code
        return code if isinstance(code, int) and 0 < code < 256 else int(Exit.FAILURE)
    return int(Exit.FAILURE)


def list_flights(
    stage: Optional[str] = typer.Option(None, "--stage", metavar="S", help="|".join(STAGES)),
    limit: int = typer.Option(200, "--limit", min=1, max=100000,
                              help="Show the newest N (the first page)."),
    all_: bool = typer.Option(False, "--all", help="Every flight (follows the listing's pages)."),
    pending: bool = typer.Option(False, "--pending",
                                 help="Only what waits for a person (approvals, gates)."),
    json_: bool = typer.Option(False, "--json"),
    watch_: bool = typer.Option(False, "--watch", "-w", help="Draw it again as it changes "
                                                             "(q or Ctrl-C quits)."),
    graph: Optional[str] = typer.Option(None, "--graph", metavar="FLIGHT",
                                        help="Draw the graph FLIGHT belongs to, with stages."),
) -> None:
    """Flights, newest first, with why each waiting one waits."""
    if graph is not None:  # docs/work-graphs.md
        from gg.cli.graphs import show_graph

        return show_graph(graph, json_)
    if pending:
        from gg.cli.approvals import list_pending

        if stage is not None:
            raise CliError("--pending lists gated flights; leave out --stage", Exit.USAGE)
        list_pending(json_)
        return
    if stage is not None and stage not in STAGES:
        raise CliError(f"--stage must be one of {', '.join(STAGES)} (got {stage!r})", Exit.USAGE)
    api = client()
    if watch_:
        from gg.cli.watch import watch

        watch(lambda: _flights_table(api.flights(stage=stage, limit=limit), stage), "flights")
        return
    rows = api.flights(stage=stage, limit=None if all_ else limit)
    if json_:
        emit_json(rows)
        return
    console().print(_flights_table(rows, stage))


def _flights_table(rows, stage: str | None):
    if not rows:
        from rich.text import Text

        return Text("no flights" + (f" {stage}" if stage else "") + ": open one with gg fly -- CMD")
    t = table("ID", "STAGE", "RUNNER", "ATTEMPT", "EXIT", "OPENED", "BY", "TITLE / WHY IT WAITS")
    now = time.time()
    for f in rows:
        t.add_row(f.id, state(f.stage), f.runner_name or "-", str(f.attempt),
                  "-" if f.exit_code is None else str(f.exit_code), ago(f.opened_at, now),
                  f.opened_by_name or "-", _why(f) if f.waiting else f.title)
    return t


def _why(f) -> str:
    """The waiting sentence, and when it is expected to start if that is known."""
    return f"{f.waiting}; {f.expected_start}" if f.expected_start else f.waiting


def show(flight_id: str = typer.Argument(..., metavar="FLIGHT"),
         json_: bool = typer.Option(False, "--json"),
         follow_: bool = typer.Option(False, "--follow", "-f", help="Keep streaming its output.")) -> None:
    """One flight: stage, lease holder, attempts, facts and output, and why it waits."""
    api = client()
    f = api.flight(flight_id)
    if json_:
        emit_json(f)
        return
    lines = [f"flight {f.id}: {f.title}",
             f"  stage     {f.stage}" + (f" ({f.ended_reason})" if f.ended_reason else ""),
             f"  opened    {ago(f.opened_at)} by {f.opened_by_name}",
             f"  command   {' '.join(f.command)}"]
    if getattr(f, "note", None):  # gg fly --note: its lines under one another
        lines.append("  note      " + f.note.replace("\n", "\n            "))
    if f.environment:
        lines.append(f"  env       {f.environment}")
    if f.priority != Priority.NORMAL:
        lines.append(f"  priority  {f.priority}")
    if f.lease:
        lease = f.lease
        lines.append(f"  lease     {f.runner_name} ({lease.runner}), epoch {lease.epoch}, "
                     f"expires {ago(lease.expires_at)}")
    if f.timeout is not None:
        lines.append(f"  timeout   {describe_duration(f.timeout)}"
                     + (f" ({f.time_left_sentence})" if f.time_left_sentence else ""))
    lines.extend(_contract_lines(f))
    if f.stopping:
        lines.append(f"  {f.stopping}")
    if f.exit_code is not None:
        lines.append(f"  exit      {f.exit_code}")
    lines.extend(_approval_lines(f))
    lines.extend(_linked_lines(f))
    if f.waiting or f.ended:
        lines.append(f"  {f.waiting or f.ended}")
        if f.expected_start:
            lines.append(f"  {f.expected_start}")
        if f.remedy and f"gg show {f.id}" not in f.remedy:  # not "run what you just ran"
            lines.append(f"  remedy: {f.remedy}")
    lines.extend(_retry_lines(f))
    for a in f.attempts:
        lines.append(f"  attempt {a.attempt}: {a.runner_name} (epoch {a.epoch}), "
                     f"{ago(a.granted_at)}" + _attempt_end(a))
    typer.echo("\n".join(lines))
    last = 0
    output = []
    for fact in f.facts:
        last = fact.seq
        if fact.kind == "output":
            output.append(fact.body.get("text", ""))
        else:
            typer.echo(f"  fact {fact.kind}: {_brief(fact.body)}")
    if output:
        typer.echo("--- output ---")
        sys.stdout.write("".join(output))
    if follow_ and not Stage(f.stage).final:
        final = follow(api, flight_id, after=last)
        raise typer.Exit(exit_code_of(final, api))


def _contract_lines(f) -> list[str]:
    """Its concurrency key and its grace (docs/jobs.md): a line each."""
    lines = []
    c = getattr(f, "concurrency", None)
    if c is not None:
        lines.append(f"  concurrency {c.key} (at most {c.limit} at once"
                     + (", cancels older ones in progress" if c.cancel_in_progress else "")
                     + ")")
    grace = getattr(f, "grace", None)
    if grace is not None:
        lines.append(f"  grace     {describe_duration(grace)} from SIGTERM to SIGKILL")
    used = getattr(f, "secrets", None) or []  # --secret: names, never values
    if used:
        lines.append("  secrets   " + ", ".join(
            s.name if s.envvar == s.name else f"{s.name} as ${s.envvar}" for s in used))
    minted = getattr(f, "id_tokens", None) or []  # gg id-token: never the token
    if minted:
        last = minted[-1]
        lines.append(f"  id tokens {len(minted)} minted; the last for {last.audience} "
                     f"(epoch {last.epoch}) {ago(last.at)}")
    return lines


def _retry_lines(f) -> list[str]:
    """Its retries, and the reruns both ways (docs/jobs.md)."""
    lines = []
    if f.retry is not None:
        lines.append(f"  retries   {f.retry.text} ({f.retried} used)")
    if f.rerun_of:
        lines.append(f"  rerun of  {f.rerun_of}")
    if f.reruns:
        lines.append(f"  reruns    {', '.join(f.reruns)}")
    return lines


def _attempt_end(a) -> str:
    """How an attempt ended, and its retry: ``; failed (exit 1): retry 1 of 3 after exit 1``."""
    if a.ended is None:
        return ""
    words = f"; {a.ended}" + (f" ({a.reason})" if a.reason else "")
    return words + (f": {a.retry}" if a.retry else "")


def _approval_lines(f) -> list[str]:
    """What it runs (the digest), what was approved, and the approval it waits for, with
    what changed (docs/approvals.md)."""
    a = f.approval
    if a is None:
        return []
    lines = [f"  digest    {a.digest}"]
    if a.approved is not None:
        lines.append(f"  approved  {a.approved.digest} by {a.approved.by}"
                     + (f", {ago(a.approved.at)}" if a.approved.at else ""))
    w = a.waiting
    if w is not None:
        what = "a change" if w.change else "it"
        lines.append(f"  approval  {what} waits for {w.who_may_clear} (gate {w.gate}): "
                     f"approving runs {w.digest}: {shlex.join(w.command)}")
        lines.extend(f"  changed   by {w.changed_by}: {c}" for c in w.changes)
    return lines


def _linked_lines(f) -> list[str]:
    """The flights it runs after and those that run after it (docs/work-graphs.md)."""
    def brief(d) -> str:
        return f"{d.id} ({d.title}) {d.stage}" if d.title else f"{d.id} {d.stage}"

    lines = []
    if f.after:
        lines.append(f"  after     {', '.join(brief(d) for d in f.after)}"
                     + (" (any ending)" if f.after_any else ""))
    if f.dependents:
        lines.append(f"  before    {', '.join(brief(d) for d in f.dependents)}")
    return lines


def rerun(flight_id: str = typer.Argument(..., metavar="FLIGHT"),
          with_: Optional[List[str]] = typer.Option(
              None, "--with", metavar="KEY=VALUE",
              help="Change one setting (repeat): env, runner, title, priority, timeout, "
                   "retries, retry-on, retry-delay, retry-elsewhere."),
          json_: bool = typer.Option(False, "--json")) -> None:
    """Open a new flight from FLIGHT's spec (with changes), linked to it both ways."""
    changes = _rerun_changes(with_ or [])
    f = client().rerun(flight_id, changes)
    if json_:
        emit_json(f)
        return
    typer.echo(f.id)


# gg rerun --with KEY=VALUE: each KEY, the gg fly flag it stands for
RERUN_KEYS = ("env", "runner", "title", "priority", "timeout", "retries", "retry-on",
              "retry-delay", "retry-elsewhere")


def _rerun_changes(pairs: list[str]) -> dict:
    """``--with KEY=VALUE`` pairs as the rerun's body (one sentence for a bad one)."""
    out: dict = {}
    said: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        key = key.strip()
        if not eq or key not in RERUN_KEYS:
            raise CliError(f"--with takes KEY=VALUE, KEY one of {', '.join(RERUN_KEYS)} "
                           f"(got {pair!r})", Exit.USAGE)
        if key in said:
            raise CliError(f"--with {key} is given twice", Exit.USAGE)
        said[key] = value.strip()
    if "env" in said:
        out["environment"] = said["env"]
    for key in ("runner", "title"):
        if key in said:
            out[key] = said[key]
    if "priority" in said:
        if said["priority"] not in PRIORITIES:
            raise CliError(f"--with priority= must be one of {', '.join(PRIORITIES)} "
                           f"(got {said['priority']!r})", Exit.USAGE)
        out["priority"] = said["priority"]
    if "timeout" in said:
        out["timeout"] = _duration("--with timeout=", said["timeout"])
    retries = said.get("retries")
    if retries is not None and not retries.isdigit():
        raise CliError(f"--with retries= is a whole number from 0 to 10 (got {retries!r})",
                       Exit.USAGE)
    elsewhere = said.get("retry-elsewhere")
    if elsewhere is not None and elsewhere not in ("true", "false"):
        raise CliError(f"--with retry-elsewhere= is true or false (got {elsewhere!r})",
                       Exit.USAGE)
    if any(k.startswith("retr") for k in said):
        from gg.domain.retries import Retry, parse_on

        asked = Retry(retries=int(retries) if retries is not None else None,
                      on=parse_on(said["retry-on"]) if "retry-on" in said else None,
                      delay=(_duration("--with retry-delay=", said["retry-delay"])
                             if "retry-delay" in said else None),
                      elsewhere=None if elsewhere is None else elsewhere == "true")
        if problem := asked.problem():
            raise CliError(problem, Exit.USAGE)
        out["retry"] = asked.to_wire()
    return out


def cancel(flight_id: str = typer.Argument(..., metavar="FLIGHT"),
           json_: bool = typer.Option(False, "--json")) -> None:
    """Cancel a flight; a flying one is stopped by its runner within one renewal."""
    f = client().cancel(flight_id)
    if json_:
        emit_json(f)
        return
    typer.echo(f"{f.id} {f.stage}")


def _brief(body: dict) -> str:
    return words(body) or "-"
