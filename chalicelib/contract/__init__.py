"""The HTTP API's contract: the OpenAPI document of every route, built from the constants the
validation code uses (never restated here). `schemas` holds the building blocks, `routes` one
entry per route, `document` assembles them. Pure; only app.py imports it. docs/api.md, "The
contract"."""
