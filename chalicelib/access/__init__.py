"""Access keys: scopes, name prefixes, origins, tracker keys' sites, each key's request rate, the
authorizer's decision and key storage. Why each check holds and what it cannot stop: docs/access.md."""
