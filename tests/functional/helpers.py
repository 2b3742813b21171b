"""Helpers the functional tests share: sending through the API as a client would."""

from __future__ import annotations

import json
from typing import Any


def post_events(client: Any, events: list[dict[str, Any]]) -> None:
    """POST events in batches of 25 (the API's limit); every batch must be stored."""
    for start in range(0, len(events), 25):
        response = client.http.post(
            "/events",
            headers={"Content-Type": "application/json"},
            body=json.dumps({"events": events[start : start + 25]}),
        )
        assert response.status_code == 201, response.body


def invoke(client: Any, function: str, event: dict[str, Any]) -> Any:
    """Run a background handler the one way the tests do: as Lambda would, through Chalice's test
    client (the handler's middleware included), with a Lambda-shaped event; its return value."""
    return client.lambda_.invoke(function, event).payload
