"""The HTTP API's contract: the OpenAPI document (`document`) of every route (`routes`), with its schemas
(`schemas`). Pure; only app.py imports it. docs/api.md, "The contract"."""
