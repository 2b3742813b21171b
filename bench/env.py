"""What every benchmark needs first: fake credentials, no endpoint, the emulator speedup."""

from __future__ import annotations

import os


def prepare() -> None:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(key, value)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    from tools import moto_patches

    moto_patches.install()
