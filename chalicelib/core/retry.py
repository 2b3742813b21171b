"""The pause before retrying an AWS call that asked to be retried."""

from __future__ import annotations

import random


def backoff(attempt: int, cap: float = 2.0) -> float:
    """Seconds to wait before retry number `attempt` (from 0): "equal jitter" around a doubling
    step of 50 ms, at most `cap`, so writers that collided do not collide again in lock step."""
    step = min(0.05 * 2.0**attempt, cap)
    return step / 2 + random.uniform(0, step / 2)
