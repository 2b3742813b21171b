"""What a background handler did with one batch: one shape for every source, logged as one line and
turned into metrics (what each field means: docs/deploy.md, "Logs" and "Metrics")."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
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
        counts = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "details"}
        return {**counts, "quarantined": len(self.quarantined), **self.details}
