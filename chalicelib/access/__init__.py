"""Access keys: scopes, name prefixes, allowed origins, the authorizer's decision and key storage."""
