"""The views queue's message format: one view per message, as compact JSON. Pure."""

from __future__ import annotations

import json

from chalicelib.core import inputs
from chalicelib.views.validation import View, parse_view


def to_message(view: View) -> str:
    return json.dumps({"url": view.url, "time": view.time_ms, "clientId": view.client_id}, separators=(",", ":"))


def from_message(body: str) -> View:
    """The view a queue message carries; ValidationError if it is not one."""
    return parse_view(inputs.json_body(body), "message")
