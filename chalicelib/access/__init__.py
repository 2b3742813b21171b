"""Access keys: scopes, name prefixes, origins, tracker keys' sites, each key's request rate, the
authorizers' and the route-level decisions, and key storage. docs/access.md."""
