"""The current time and the pause between retries, in one place so tests can move them."""

import time
from collections.abc import Callable

Sleep = Callable[[float], None]


def now_ms() -> int:
    return int(time.time() * 1000)


def sleep(seconds: float) -> None:
    time.sleep(seconds)
