"""Lambda settings per function, checked from the stage configuration and the definitions."""

from __future__ import annotations

from typing import Any

import pytest
from chalice.config import Config
from chalice.constants import DEFAULT_LAMBDA_MEMORY_SIZE, DEFAULT_LAMBDA_TIMEOUT

from tools import resources, stage

STAGES = [name for name in stage.load_config()["stages"] if name != "local"]
API_GATEWAY_TIMEOUT_SECONDS = 29  # API Gateway stops waiting after 29 s; longer buys nothing


def function_config(stage_name: str, function: str) -> Config:
    return Config(chalice_stage=stage_name, function_name=function, config_from_disk=stage.load_config())


def timeout(stage_name: str, function: str) -> int:
    return function_config(stage_name, function).lambda_timeout or DEFAULT_LAMBDA_TIMEOUT


def app_functions(app: Any) -> list[str]:
    names = [source.name for source in app.event_sources] + [f.name for f in getattr(app, "pure_lambda_functions", [])]
    return (["api_handler"] if app.routes else []) + names


@pytest.mark.parametrize("stage_name", STAGES)
def test_given_each_queue_then_its_visibility_timeout_is_at_least_six_times_its_consumers_timeout(
    stage_name: str, app_module: Any
) -> None:
    queues = resources.for_settings(stage.stage_settings(stage_name)).queues
    sqs_sources = {s.name: s.queue for s in app_module.app.event_sources if type(s).__name__ == "SQSEventConfig"}
    by_queue = {q.name: q for q in resources.for_settings(app_module.settings).queues}

    assert queues and all(q.consumer for q in queues)
    for queue in queues:
        assert queue.visibility_timeout >= 6 * timeout(stage_name, queue.consumer), queue
    for handler, queue_name in sqs_sources.items():
        assert queue_name in by_queue, f"{handler} reads {queue_name}, which tools/resources.py does not define"
        assert by_queue[queue_name].consumer == handler, f"set consumer={handler!r} on {queue_name} in resources.py"


@pytest.mark.parametrize("stage_name", STAGES)
def test_given_every_function_of_the_app_then_its_timeout_is_set_for_the_stage(
    stage_name: str, app_module: Any
) -> None:
    functions = app_functions(app_module.app)
    configured = stage.load_config()["stages"][stage_name].get("lambda_functions", {})

    assert "on_event_records" in functions
    missing = [f for f in functions if "lambda_timeout" not in configured.get(f, {})]
    assert missing == [], f"add lambda_functions.<name>.lambda_timeout for the {stage_name} stage"
    assert timeout(stage_name, "api_handler") <= API_GATEWAY_TIMEOUT_SECONDS


@pytest.mark.parametrize("stage_name", STAGES)
def test_given_the_hyperloglog_consumer_then_it_gets_more_memory_than_the_default(stage_name: str) -> None:
    settings = stage.stage_settings(stage_name)
    uniques = next(q for q in resources.for_settings(settings).queues if q.name == settings.uniques_queue)

    memory = function_config(stage_name, uniques.consumer).lambda_memory_size

    assert memory is not None and memory > DEFAULT_LAMBDA_MEMORY_SIZE


@pytest.mark.parametrize("stage_name", STAGES)
def test_given_the_functions_that_answer_requests_then_each_has_reserved_concurrency_bounding_the_stages_spend(
    stage_name: str, app_module: Any
) -> None:
    """The API function, the tracker's function URL and the authorizers run for every request,
    keyed or not: reserved concurrency caps how many run at once (and so what a flood can cost),
    whatever the keys' rates."""
    answering = ["api_handler", "beacon_url"] + [authorizer.name for authorizer in app_module.app.builtin_auth_handlers]

    reserved = {name: function_config(stage_name, name).reserved_concurrency for name in answering}

    assert set(answering) >= {"api_handler", "beacon_url", "ingest_key", "read_key", "admin_key"}
    assert all(isinstance(n, int) and n > 0 for n in reserved.values()), reserved
