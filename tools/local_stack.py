"""Run all of Tally locally: emulator, resources, every handler app.py declares, and the API.

    python -m tools.local_stack [--port 8000] [--aws-port 5000]

With AWS_ENDPOINT_URL set, an already running emulator is used instead of starting one.
Send SIGUSR1 (`make trigger`) to run every scheduled handler now.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import boto3

from tools.stage import stage_environment

PROJECT = Path(__file__).resolve().parent.parent
log = logging.getLogger("tally.local")


def start_emulator(host: str, port: int) -> Any:
    from moto.server import ThreadedMotoServer

    from tools import moto_patches

    moto_patches.install()

    server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    server.start()
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="API port")
    parser.add_argument("--aws-port", type=int, default=5000, help="port of the embedded emulator")
    parser.add_argument("--stage", default="local")
    parser.add_argument(
        "--max-batching-window",
        type=float,
        default=None,
        help="cap SQS batching windows (seconds), for quick local feedback",
    )
    parser.add_argument(
        "--admin-key-file", type=Path, default=None, help="where the local admin key is kept (.tally/local-admin-key)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stdout)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)

    # Stage variables first; what the user exported wins.
    for key, value in stage_environment(args.stage).items():
        os.environ.setdefault(key, value)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(key, "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

    emulator = None
    if not os.environ.get("AWS_ENDPOINT_URL"):
        emulator = start_emulator(args.host, args.aws_port)
        os.environ["AWS_ENDPOINT_URL"] = f"http://{args.host}:{args.aws_port}"
    log.info("AWS emulator at %s", os.environ["AWS_ENDPOINT_URL"])

    sys.path.insert(0, str(PROJECT))
    from chalicelib.core.settings import Settings
    from tools import resources
    from tools.event_runners import ScheduleRunner, SqsRunner, StreamRunner

    settings = Settings.from_env()
    session = boto3.session.Session(region_name=settings.aws_region)
    endpoint = settings.aws_endpoint_url
    dynamodb = session.client("dynamodb", endpoint_url=endpoint)
    outputs = resources.ensure(
        dynamodb,
        session.client("sqs", endpoint_url=endpoint),
        session.client("s3", endpoint_url=endpoint),
        resources.for_settings(settings),
        settings.aws_region,
    )
    # The emulator names streams by creation time: hand the real ARN to the app.
    os.environ["EVENTS_STREAM_ARN"] = outputs[settings.events_table]
    log.info("resources ready: %s", ", ".join(sorted(outputs)))
    from tools import gateway, keys

    gateway.install()  # 401/403/404 answered as API Gateway's gateway responses are (tools/gateway.py)
    key_file = args.admin_key_file or keys.LOCAL_ADMIN_KEY
    admin_key, created = keys.local_admin_key(dynamodb, settings, key_file)
    log.info(
        "%s admin key %s (in %s): send it as Authorization: Bearer <key>",
        "new" if created else "local",
        admin_key,
        key_file,
    )

    app_module = importlib.import_module("app")
    app = app_module.app
    stop = threading.Event()
    runners = []
    schedules: list[ScheduleRunner] = []
    for source in app.event_sources:
        handler = app.handler_map[source.name]
        kind = type(source).__name__
        if kind == "DynamoDBEventConfig":
            runners.append(
                StreamRunner(
                    source.name,
                    handler,
                    session.client("dynamodbstreams", endpoint_url=endpoint),
                    source.stream_arn,
                    source.batch_size,
                    source.starting_position,
                    settings.aws_region,
                    stop,
                )
            )
        elif kind == "SQSEventConfig":
            window = source.maximum_batching_window_in_seconds or 0
            if args.max_batching_window is not None:
                window = min(window, args.max_batching_window)
            runners.append(
                SqsRunner(
                    source.name,
                    handler,
                    session.client("sqs", endpoint_url=endpoint),
                    source.queue,
                    source.batch_size,
                    window,
                    settings.aws_region,
                    stop,
                )
            )
        elif kind == "ScheduledEventConfig":
            expression = source.schedule_expression
            expression = expression if isinstance(expression, str) else expression.to_string()
            schedule = ScheduleRunner(source.name, handler, expression, settings.aws_region, stop)
            runners.append(schedule)
            schedules.append(schedule)
        else:
            log.warning("%s: %s handlers are not run locally", source.name, kind)
    for runner in runners:
        runner.start()
        log.info("handler %s running (%s)", runner.name, type(runner).__name__)

    def run_schedules(*_: Any) -> None:
        for schedule in schedules:
            log.info("%s: triggered on demand", schedule.name)
            schedule.trigger()

    signal.signal(signal.SIGUSR1, run_schedules)

    from chalice.cli.factory import CLIFactory
    from chalice.local import create_local_server

    config = CLIFactory(str(PROJECT), environ=os.environ).create_config_obj(chalice_stage_name=args.stage)
    server = create_local_server(app, config, args.host, args.port)
    # Ctrl-C and SIGTERM stop the server from another thread (shutdown() waits for serve_forever);
    # setting SIGINT explicitly also works when a shell started the stack with SIGINT ignored.
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop_signal, lambda *_: threading.Thread(target=server.shutdown).start())
    (PROJECT / ".local-stack.pid").write_text(str(os.getpid()))
    log.info("API on http://%s:%d", args.host, args.port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        for runner in runners:
            runner.join(timeout=5)
        server.server.server_close()
        if emulator is not None:
            emulator.stop()
        (PROJECT / ".local-stack.pid").unlink(missing_ok=True)
        log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
