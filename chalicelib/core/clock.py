"""The current time, in one place so tests can move it."""

import time


def now_ms() -> int:
    return int(time.time() * 1000)
