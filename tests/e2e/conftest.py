"""One local stack for the end-to-end tests that can share it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.stack import LocalStack, running_stack


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with running_stack(tmp_path_factory.mktemp("local-stack")) as stack:
        yield stack
