"""Every key prefix of the counts table, in one place. Pure.

The counts table holds every capability's items, told apart by the prefix of the partition
key. A capability builds its keys from these constants (and its own key module), so two
capabilities can never collide and an operator can read any item's owner from its key.

    pk                                   sk                      what
    CTR#<counter>                        h#<hour> | d#<day>      a windowed-count bucket (counters)
    FLT#<counter>#<subset hash>          h#<hour> | d#<day>      the buckets of the events having some dimension values
                                                                 (counters/dimension_keys.py)
    TOP#<counter>#<dimension>            q#|h#|d#<n>#<part>      a breakdown summary: values with counts and sums
                                                                 (counters/topk.py)
    EVT#<counter>#<id>                   #                       marker: an event with a client id was counted
    AUQ#<quarter hour>                   s:<shard hash>          what the counting path did with the events of a
                                         | #repaired             quarter hour's partitions, one item per stream
                                                                 shard, and the repair's (counters/audit_keys.py)
    AUDIT#checkpoint                     #                       start of the next quarter hour to audit
    AUDIT#short                          <events pk>             a partition that does not add up (counters)
    URL#<sha256 of url>                  TOTAL                   an exact view counter (views)
    URL#<sha256 of url>                  K#<hex token>           a view's marker spilled from the counter (views)
    VWB#<sha256 of url>                  h#<n> | d#<n> | b#<n>   views of an hour (minute counts inside), a UTC
                                                                 day (hour counts), a 32-day block (day counts)
    VTOP#<h|d|b>#<n>                     S                       the most viewed URLs of an hour, day or block: a
                                                                 heavy-hitters summary of URL digests (views)
    VTOP#b#<n>                           E | L#<epoch>#<id>      a block's summary log epoch / one batch's snapshots
                                                                 waiting to be folded into the summaries (views)
    HLL#<name>                           shard#<nn>              an all-time unique-count sketch shard (uniques)
    HLW#<name>                           h#<hour> | d#<day>      a unique-count sketch of one hour / UTC day
    HLN#index                            <name>                  a unique-count name and when it was last seen
    REPORT#checkpoint                    #                       end of the last committed report (reports)
    REPORT#index                         <report id>             one committed report
    QUARANTINE#<source>                  <record id>             a background record set aside (core)
    KEY#                                 <sha256 of the key>     an access key: scopes, prefix, origins (access)
    RATE#<key id>                        s#<epoch second>        a key's requests in one second; expires (access/rates.py)
    CATALOG#<kind>#log                   <ms>#<content digest>   names one batch saw that were not known listed,
                                                                 packed; the fold merges them; expires (core/catalog.py)
    CATALOG#<kind>#pages                 p#<lowest name>         a sorted run of a catalog's names, packed
    CATALOG#<kind>#fold                  #                       how far the fold has closed and merged the log
    CATALOG#sites                        <site>                  a site sent page views; when last seen (sites)
    SALT#                                d#<day>                 the visitor-id salt of one UTC day: 32 random
                                                                 bytes, expires two days after the day starts and
                                                                 never leaves the table (sites/salts.py)
"""

from __future__ import annotations

COUNTER = "CTR#"
FILTER = "FLT#"
SUMMARY = "TOP#"
EVENT_MARKER = "EVT#"
AUDIT_GROUP = "AUQ#"
AUDIT_RUN = "AUDIT#"
VIEW_URL = "URL#"
VIEW_BUCKET = "VWB#"
VIEW_TOP = "VTOP#"
SKETCH = "HLL#"
SKETCH_WINDOW = "HLW#"
SKETCH_NAMES = "HLN#"
REPORT = "REPORT#"
QUARANTINE = "QUARANTINE#"
ACCESS_KEY = "KEY#"
KEY_RATE = "RATE#"
CATALOG = "CATALOG#"
CATALOG_LOG = "#log"  # after CATALOG<kind>: the catalog's log items
CATALOG_PAGES = "#pages"  # after CATALOG<kind>: the catalog's pages
CATALOG_FOLD = "#fold"  # after CATALOG<kind>: the fold's mark
SALT = "SALT#"


def index_sort_key(prefix: str, index: int) -> str:
    """`<prefix>#<index>`: the sort key of a numbered item (a bucket's hour or day since the
    epoch), the index zero-padded to 10 digits so that text order is number order."""
    return f"{prefix}#{index:010d}"


def sort_key_index(sort_key: str) -> int:
    """The index of a sort key made by index_sort_key."""
    return int(sort_key.split("#", 1)[1])
