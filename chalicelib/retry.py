"""The pause before retrying an AWS call that asked to be retried."""


def backoff(attempt: int, cap: float = 2.0) -> float:
    """Seconds to wait before retry number `attempt` (from 0): 50 ms, doubling, at most `cap`."""
    return min(0.05 * 2**attempt, cap)
