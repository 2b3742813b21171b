"""The local stack's HTTP server under a base path (tools/gateway.py's mount), in-process on
moto: the API answers below the base as the app's routes say, and the dashboard page names
what it loads relative to itself; outside the base, API Gateway's own 403 for a stage it does
not have, which the app never sees."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urljoin

import pytest
import requests

from tools import gateway
from tools.stage import PROJECT

NO_STAGE = {"message": "Forbidden"}


@pytest.fixture
def serve(client: Any, app_module: Any) -> Iterator[Any]:
    """serve(base_path) -> the origin of Chalice's local server mounted at base_path."""
    from chalice.cli.factory import CLIFactory
    from chalice.local import create_local_server

    app = app_module.app
    kind = app.__class__  # create_local_server swaps the app's class for its thread-local one
    config = CLIFactory(str(PROJECT)).create_config_obj(chalice_stage_name="local")
    servers = []

    def serve(base_path: str) -> str:
        server = create_local_server(app, config, "127.0.0.1", 0)
        gateway.mount(server, app, config, base_path, "api")
        threading.Thread(target=server.server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server.server_address[1]}"

    try:
        yield serve
    finally:
        for server in servers:
            server.shutdown()
            server.server.server_close()
        app.__class__ = kind


def forbidden(response: requests.Response) -> bool:
    return (
        response.status_code == 403
        and response.json() == NO_STAGE
        and response.headers["x-amzn-ErrorType"] == "ForbiddenException"
    )


@pytest.mark.parametrize("base", ["/api", "/tally"])
def test_given_a_base_path_when_asked_inside_and_outside_then_the_api_below_it_and_api_gateways_403_outside(
    client: Any, aws: Any, serve: Any, base: str
) -> None:
    origin = serve(base)
    key = {"Authorization": f"Bearer {client.admin_key}"}
    for method, path in [
        ("GET", "/counters/x"),
        ("POST", "/events"),
        ("GET", "/"),
        ("GET", "/openapi.json"),
        ("OPTIONS", "/counters/x"),
        ("GET", f"{base}x/counters/x"),  # a base path is whole segments
        ("POST", f"/other{base}/events"),
    ]:
        outside = requests.request(method, f"{origin}{path}", headers=key, json={"counter": "x"}, timeout=10)
        assert forbidden(outside), (method, path, outside.status_code, outside.text)
        assert "Access-Control-Allow-Origin" not in outside.headers
    assert stored(aws) == 0  # the app never saw the POSTs

    inside = requests.get(f"{origin}{base}/counters/x", headers=key, timeout=10)
    assert inside.status_code == 200 and inside.json()["count"] == 0
    assert requests.post(f"{origin}{base}/events", json={"counter": "x"}, headers=key, timeout=10).status_code == 201
    assert stored(aws) == 1
    missing = requests.get(f"{origin}{base}/no-such-route", headers=key, timeout=10)
    assert (missing.status_code, missing.json()["Code"]) == (404, "NotFoundError")  # Tally's gateway response


def stored(aws: Any) -> int:
    from chalicelib.core.settings import Settings

    return int(aws.dynamodb.scan(TableName=Settings.from_env({}).events_table, Select="COUNT")["Count"])


@pytest.mark.parametrize(("base", "page"), [("/api", "/api"), ("/api", "/api/"), ("/tally", "/tally"), ("/", "/")])
def test_given_the_dashboard_page_under_a_base_when_its_urls_are_followed_then_each_answers_under_the_base(
    serve: Any, base: str, page: str
) -> None:
    origin = serve(base)
    answer = requests.get(f"{origin}{page}", timeout=10)
    assert answer.status_code == 200 and answer.headers["Content-Type"].startswith("text/html")
    html = answer.text
    linked = [part.split('"')[0] for part in html.split('src="')[1:] + html.split('href="')[1:]]
    linked = [url for url in linked if not url.startswith(("#", "data:"))]
    assert len(linked) >= 6  # three scripts, two style sheets, the OpenAPI document
    for url in linked:
        absolute = urljoin(f"{origin}{page}", url)
        assert absolute.startswith(f"{origin}{base.rstrip('/')}/"), absolute
        assert requests.get(absolute, timeout=10).status_code == 200, absolute
