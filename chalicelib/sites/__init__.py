"""Site analytics: the tracker script, visitor ids, page-view beacons and site summaries,
composed from the public functions of views, uniques and counters (and events, to write)."""
