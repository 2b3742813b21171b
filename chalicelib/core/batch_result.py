"""What a background handler did with one batch: one shape for every source.

Each handler returns it, logs it as one line and turns it into metrics, so the same names mean
the same thing everywhere: `records` came in, `counted` were applied, `duplicates` had been
applied by an earlier delivery (or came twice in the batch), `quarantined` were set aside with
their reason, `failed` are left for redelivery, `transactions` writes were attempted and
`retries` of them waited for a transient failure. What only one source has goes in `details`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class BatchResult:
    records: int = 0
    counted: int = 0
    duplicates: int = 0
    quarantined: list[str] = field(default_factory=list)
    failed: int = 0
    transactions: int = 0
    retries: int = 0
    details: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "counted": self.counted,
            "duplicates": self.duplicates,
            "quarantined": len(self.quarantined),
            "failed": self.failed,
            "transactions": self.transactions,
            "retries": self.retries,
            **self.details,
        }
