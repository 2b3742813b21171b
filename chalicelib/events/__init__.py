"""Events in and out: the POST /events body and its events-table items (ingest, packs, dimensions),
and the stream records counting reads them back from (stream_records). Why one item per request
and how each event of a pack is counted once: docs/counting.md, "Packs"."""
