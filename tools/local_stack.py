"""Run all of Tally locally: emulator, resources, every handler app.py declares, and the API.

    python -m tools.local_stack [--port 8000] [--aws-port 5000] [--fresh] [--base-path /api]
    python -m tools.local_stack --port 8000 --trigger    # run the scheduled handlers of that stack now

With AWS_ENDPOINT_URL set, an already running emulator is used instead of starting one (and
its data is that emulator's business: nothing is saved). Otherwise the emulator's tables,
queues and bucket are saved under `.local-stack/<port>/data` when the stack stops (and
periodically while it runs) and restored when it starts again; `--fresh` starts empty
(tools/local_state.py says what a hard kill can lose). Everything a stack keeps on disk,
its pid file included, is under `.local-stack/<port>/`, so stacks on other ports do not
interfere. Send SIGUSR1 (`make trigger PORT=...`) to run every scheduled handler now.

The API answers where API Gateway serves it: under the stage's name (`api_gateway_stage` in
.chalice/config.json), http://127.0.0.1:8000/api/..., and outside it as API Gateway answers for
a stage it does not have. `--base-path /` serves it at the root, as a custom domain whose base
path mapping is the root does; `--base-path /tally` as a mapping with that base path.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import boto3

from tools import stage

PROJECT = Path(__file__).resolve().parent.parent
log = logging.getLogger("tally.local")
DRAIN_SECONDS = 15  # how long a clean stop waits for the stream handler to catch up


class PortBusy(SystemExit):
    pass


def state_dir(port: int, root: Path = PROJECT) -> Path:
    return root / ".local-stack" / str(port)


def pid_file(directory: Path) -> Path:
    return directory / "pid"


def require_free_port(host: str, port: int, what: str, make_variable: str, option: str) -> None:
    """Fail at once, saying how to choose another port, when something listens on it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Like the servers themselves: a port left in TIME_WAIT by a stopped stack is free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                raise
            raise PortBusy(
                f"port {port} on {host} ({what}) is already in use. Choose another one: "
                f"`make run {make_variable}=<port>` (or `{option} <port>`)"
            ) from None


def trigger(port: int, directory: Path | None = None) -> int:
    """What `make trigger PORT=...` does: SIGUSR1 to the stack serving that port."""
    path = pid_file(directory or state_dir(port))
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        print(
            f"no local stack is running with its API on port {port} ({path} names no live process); "
            f"start one with `make run PORT={port}`, or give the port of the one running: `make trigger PORT=<port>`",
            file=sys.stderr,
        )
        return 1
    os.kill(pid, signal.SIGUSR1)
    print(f"ran the scheduled handlers of the stack on port {port} (pid {pid}); its log shows the runs")
    return 0


def configure_logging() -> None:
    """Every line the stack writes is JSON, like the handlers' lines (Powertools' formatter)."""
    from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(LambdaPowertoolsFormatter(service="tally"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    for noisy in ("werkzeug", "botocore.credentials", "botocore", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def start_emulator(host: str, port: int) -> Any:
    from moto.server import ThreadedMotoServer

    from tools import moto_patches, sqs_limits

    moto_patches.install()
    sqs_limits.install()

    server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    server.start()
    return server


def shift_clock(offset_file: Path) -> None:
    """Run the app's clock ahead of the real one by what `offset_file` holds (milliseconds; no
    file: 0), so a test can let a quarter hour close and settle without waiting for it. Every
    handler reads the time through core.clock, so this moves all of them together."""
    from chalicelib.core import clock

    real = clock.now_ms

    def shifted() -> int:
        try:
            offset = int(offset_file.read_text().strip() or 0)
        except FileNotFoundError:
            offset = 0
        return real() + offset

    clock.now_ms = shifted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="API port")
    parser.add_argument("--aws-port", type=int, default=5000, help="port of the embedded emulator")
    parser.add_argument("--stage", default="local")
    parser.add_argument(
        "--base-path",
        default=None,
        help="serve the API under this path (default: /<the stage's api_gateway_stage>; / for a custom domain's root mapping)",
    )
    parser.add_argument(
        "--max-batching-window",
        type=float,
        default=None,
        help="cap SQS batching windows (seconds), for quick local feedback",
    )
    parser.add_argument(
        "--stream-shards",
        type=int,
        default=1,
        help="deliver the events stream as this many shards (an item's records in one, a partition key's across several)",
    )
    parser.add_argument("--fresh", action="store_true", help="start empty: discard the saved data first")
    parser.add_argument("--snapshot-seconds", type=float, default=60, help="save the data this often (0: only at stop)")
    parser.add_argument("--state-dir", type=Path, default=None, help="default: .local-stack/<port>")
    parser.add_argument("--trigger", action="store_true", help="run the scheduled handlers of the running stack")
    parser.add_argument(
        "--admin-key-file", type=Path, default=None, help="where the local admin key is kept (.tally/local-admin-key)"
    )
    parser.add_argument(
        "--clock-offset-file",
        type=Path,
        default=None,
        help="the app's clock runs ahead of the real one by the milliseconds this file holds (read at every tick)",
    )
    parser.add_argument(
        "--role-policy",
        type=Path,
        default=None,
        help="judge the app's AWS calls against this IAM policy (JSON) instead of the one generated for the stage",
    )
    args = parser.parse_args(argv)
    if args.trigger:
        return trigger(args.port, args.state_dir)
    configure_logging()
    try:
        return run(args)
    except PortBusy as exc:
        print(exc, file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    directory = args.state_dir or state_dir(args.port)
    require_free_port(args.host, args.port, "the API", "PORT", "--port")

    stage.export(args.stage, emulator=True)  # stage variables; what the user exported wins

    emulator = None
    if not os.environ.get("AWS_ENDPOINT_URL"):
        require_free_port(args.host, args.aws_port, "the AWS emulator", "AWS_PORT", "--aws-port")
        directory.mkdir(parents=True, exist_ok=True)
        emulator = start_emulator(args.host, args.aws_port)
        os.environ["AWS_ENDPOINT_URL"] = f"http://{args.host}:{args.aws_port}"
    log.info("AWS emulator at %s", os.environ["AWS_ENDPOINT_URL"])

    sys.path.insert(0, str(PROJECT))
    from chalicelib.core.settings import Settings
    from tools import resources
    from tools.local_state import Snapshots

    settings = Settings.from_env()
    session = boto3.session.Session(region_name=settings.aws_region)
    endpoint = settings.aws_endpoint_url
    dynamodb = session.client("dynamodb", endpoint_url=endpoint)
    sqs, s3 = session.client("sqs", endpoint_url=endpoint), session.client("s3", endpoint_url=endpoint)
    definition = resources.for_settings(settings)
    snapshots = Snapshots(directory, dynamodb, sqs, s3, definition) if emulator is not None else None
    if snapshots is not None:
        if args.fresh:
            snapshots.discard()
            log.info("starting empty (--fresh): saved data discarded", extra={"data": str(snapshots.current)})
        elif snapshots.exists():
            restored = snapshots.restore(settings.aws_region)
            log.info("data restored from %s", snapshots.current, extra={"restored": restored})
    resources.ensure(dynamodb, sqs, s3, definition, settings.aws_region)
    # The emulator forgets the item key when it stops; the saved data's item hashes need the same
    # key after a restart, so it is kept beside them (readable by its owner only).
    key_value = None if emulator is None else local_item_key(directory / ITEM_KEY_FILE)
    resources.ensure_secrets(session.client("secretsmanager", endpoint_url=endpoint), definition, key_value)
    # The emulator names streams by creation time: hand the real ARN to the app.
    os.environ["EVENTS_STREAM_ARN"] = dynamodb.describe_table(TableName=settings.events_table)["Table"][
        "LatestStreamArn"
    ]
    log.info("resources ready")
    from tools import function_url, gateway, keys, lambda_limits

    gateway.install()  # 401/403/404 answered as API Gateway's gateway responses are (tools/gateway.py)
    lambda_limits.install()  # API Gateway's and Lambda's payload limits and timeouts on each request
    key_file = args.admin_key_file or keys.LOCAL_ADMIN_KEY
    admin_key, created = keys.local_admin_key(dynamodb, settings, key_file)
    log.info(
        "%s admin key %s (in %s): send it as Authorization: Bearer <key>",
        "new" if created else "local",
        admin_key,
        key_file,
    )

    if args.clock_offset_file is not None:
        shift_clock(args.clock_offset_file)
    app_module = importlib.import_module("app")
    app = app_module.app
    role = enforce_role(app_module.aws, settings, args.stage, os.environ["EVENTS_STREAM_ARN"], args.role_policy)
    stop = threading.Event()
    runners, schedules, stream_runners = start_runners(app, session, endpoint, settings, args, stop, role)

    def run_schedules(*_: Any) -> None:
        for schedule in schedules:
            log.info("%s: triggered on demand", schedule.name)
            schedule.trigger()

    signal.signal(signal.SIGUSR1, run_schedules)

    from chalice.cli.factory import CLIFactory
    from chalice.local import create_local_server

    config = CLIFactory(str(PROJECT), environ=os.environ).create_config_obj(chalice_stage_name=args.stage)
    try:
        server = create_local_server(app, config, args.host, args.port)
    except OSError as exc:  # taken between the check and now
        raise PortBusy(f"port {args.port} (the API): {exc}. Choose another one: `make run PORT=<port>`") from None
    api_stage = stage.api_gateway_stage(args.stage)
    base = gateway.normalized_base(f"/{api_stage}" if args.base_path is None else args.base_path)
    gateway.mount(server, app, config, base, api_stage)
    # Ctrl-C and SIGTERM stop the server from another thread (shutdown() waits for serve_forever);
    # setting SIGINT explicitly also works when a shell started the stack with SIGINT ignored.
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop_signal, lambda *_: threading.Thread(target=server.shutdown).start())
    quiet_access_log()
    directory.mkdir(parents=True, exist_ok=True)
    pid_file(directory).write_text(str(os.getpid()))
    saver = None
    if snapshots is not None and args.snapshot_seconds > 0:
        saver = threading.Thread(
            target=save_periodically, args=(snapshots, args.snapshot_seconds, stop), name="snapshots", daemon=True
        )
        saver.start()
    threading.Thread(
        target=report_activity, args=(runners, activity_file(directory), stop), name="activity", daemon=True
    ).start()
    log.info("API on http://%s:%d%s/", args.host, args.port, base)
    log.info("tracker function URL (payload format 2.0) on %s", function_url.describe(args.host, args.port))
    try:
        server.server.serve_forever()  # not server.serve_forever(): it prints a plain-text banner
    except KeyboardInterrupt:
        pass
    finally:
        server.server.server_close()
        for runner in stream_runners:  # what is stored gets counted before the data is saved
            if not runner.caught_up.wait(DRAIN_SECONDS):
                log.warning("%s: not caught up after %d s; stopping anyway", runner.name, DRAIN_SECONDS)
        stop.set()
        for runner in runners:
            runner.join(timeout=10)
        if saver is not None:
            saver.join(timeout=30)
        if snapshots is not None:
            saved = snapshots.save(include_queues=True)
            log.info("data saved to %s", snapshots.current, extra={"saved": saved})
        if emulator is not None:
            emulator.stop()
        pid_file(directory).unlink(missing_ok=True)
        log.info("stopped")
    return 0


def quiet_access_log() -> None:
    """The local server's access lines in the stack's JSON format; failed requests are left
    to the app's own line (telemetry middleware), as on AWS, so each is logged once."""

    def log_message(handler: Any, format: str, *args: Any) -> None:
        status = str(args[1]) if len(args) > 1 else ""
        if not status.startswith(("4", "5")):
            log.info("request", extra={"request": str(args[0]) if args else "", "status": status})

    from chalice.local import ChaliceRequestHandler

    ChaliceRequestHandler.log_message = log_message  # type: ignore[method-assign]


def activity_file(directory: Path) -> Path:
    """Where a stack says, for each stream and queue handler, when its latest poll that found
    nothing to handle began and when it last handled something (JSON; wall-clock seconds)."""
    return directory / "activity.json"


def report_activity(runners: list[Any], path: Path, stop: threading.Event) -> None:
    """Keep `activity_file` current, so a test can wait until what it sent has been handled
    instead of sleeping and hoping."""
    import json

    polled = [r for r in runners if hasattr(r, "activity") and type(r).__name__ != "ScheduleRunner"]
    while not stop.wait(0.1):
        snapshot = {r.name: r.activity() for r in polled}
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps(snapshot))
        partial.replace(path)


def save_periodically(snapshots: Any, seconds: float, stop: threading.Event) -> None:
    while not stop.wait(seconds):
        try:
            snapshots.save(include_queues=False)
        except Exception:  # the next try may work; the stop-time save is the one that counts
            log.exception("periodic save failed")


ITEM_KEY_FILE = "item-key"


def local_item_key(path: Path) -> str:
    """The local stack's item key, made on its first start and kept in `path`."""
    from tools import resources

    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(resources.new_secret_value())
    return path.read_text()


def enforce_role(clients: Any, settings: Any, stage_name: str, stream_arn: str, policy_file: Path | None) -> Any:
    """Every call of the app's clients judged against the role policy the stage would deploy
    with (or `policy_file`'s), and refused as AWS refuses it (tools/iam_enforcement.py): the
    emulator enforces none."""
    import json

    from tools import iam_enforcement, iam_policy

    account = stream_arn.split(":")[4]  # the emulator's account, as its ARNs name it
    if policy_file is not None:
        policy = json.loads(policy_file.read_text())
    else:
        policy = iam_policy.for_settings(settings, stage_name=stage_name, region=settings.aws_region, account=account)
    role = iam_enforcement.Role(policy, account=account, name=f"{stage.load_config()['app_name']}-{stage_name}")
    iam_enforcement.guard(clients, role)
    log.info("IAM: the app's calls are judged against %s", policy_file or f"the {stage_name} stage's role policy")
    return role


def start_runners(
    app: Any,
    session: Any,
    endpoint: str | None,
    settings: Any,
    args: argparse.Namespace,
    stop: threading.Event,
    role: Any,
) -> tuple[list[Any], list[Any], list[Any]]:
    """One runner per event source app.py declares: (all, schedules, streams). Like Lambda
    creating an event source mapping, a runner is refused unless the role may read its source
    (the actions tools/iam_policy.py grants for it)."""
    from tools.event_runners import ScheduleRunner, SqsRunner, StreamRunner
    from tools.iam_policy import QUEUE_TRIGGER_ACTIONS, STREAM_TRIGGER_ACTIONS
    from tools.lambda_limits import function_limits

    runners: list[Any] = []
    schedules: list[ScheduleRunner] = []
    streams: list[StreamRunner] = []
    for source in app.event_sources:
        handler = app.handler_map[source.name]
        kind = type(source).__name__
        if kind == "DynamoDBEventConfig":
            role.require(STREAM_TRIGGER_ACTIONS, source.stream_arn, source.name)
            stream = StreamRunner(
                source.name,
                handler,
                session.client("dynamodbstreams", endpoint_url=endpoint),
                source.stream_arn,
                source.batch_size,
                source.starting_position,
                settings.aws_region,
                stop,
                split=args.stream_shards,
                limits=function_limits(args.stage, source.name),
            )
            runners.append(stream)
            streams.append(stream)
        elif kind == "SQSEventConfig":
            window = source.maximum_batching_window_in_seconds or 0
            if args.max_batching_window is not None:
                window = min(window, args.max_batching_window)
            queue = SqsRunner(
                source.name,
                handler,
                session.client("sqs", endpoint_url=endpoint),
                source.queue,
                source.batch_size,
                window,
                settings.aws_region,
                stop,
                limits=function_limits(args.stage, source.name),
            )
            role.require(QUEUE_TRIGGER_ACTIONS, queue.queue_arn, source.name)
            runners.append(queue)
        elif kind == "ScheduledEventConfig":
            expression = source.schedule_expression
            expression = expression if isinstance(expression, str) else expression.to_string()
            limits = function_limits(args.stage, source.name)
            schedule = ScheduleRunner(source.name, handler, expression, settings.aws_region, stop, limits=limits)
            runners.append(schedule)
            schedules.append(schedule)
        else:
            log.warning("%s: %s handlers are not run locally", source.name, kind)
    for runner in runners:
        runner.start()
        log.info(
            "handler %s running (%s)",
            runner.name,
            type(runner).__name__,
            extra={"timeout_s": runner.limits.timeout_s, "memory_mb": runner.limits.memory_mb},
        )
    return runners, schedules, streams


if __name__ == "__main__":
    sys.exit(main())
