"""Access keys: scopes, name prefixes, allowed origins, the authorizers' and the route-level
decisions, and key storage. How keys work and are enforced: docs/access.md."""
