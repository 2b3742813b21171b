"""The HTTP API's contract: the OpenAPI document (`document`) of every route (`routes`), its
schemas (`schemas`) built from the constants the validation code checks. Pure; only app.py
imports it. docs/api.md, "The contract"."""
