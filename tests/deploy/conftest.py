"""Fixtures for the deployment checks: a throwaway copy of what Chalice deploys."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
DEPLOYED = ("app.py", "chalicelib", "requirements.txt", ".chalice/config.json")


def copy_project(target: Path, choose_names: bool = True) -> Path:
    """The files `chalice deploy` reads, without generated ones (policies, deployments); with
    `choose_names`, placeholder names (`...-change-me`) replaced as a user must before deploying."""
    for name in DEPLOYED:
        source = PROJECT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target / name)
    if choose_names:
        config = target / ".chalice" / "config.json"
        config.write_text(json.dumps(json.loads(config.read_text().replace("-change-me", "-123456789012")), indent=2))
    return target


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return copy_project(tmp_path / "project")


@contextmanager
def app_imports_isolated() -> Iterator[None]:
    """Code that imports app.py with a stage's environment (tools.cfn_template.load_app) runs
    inside this; afterwards the environment and the imported app are as before, so the stage's
    settings never leak into other tests."""
    environ, imported = dict(os.environ), sys.modules.pop("app", None)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(environ)
        sys.modules.pop("app", None)
        if imported is not None:
            sys.modules["app"] = imported
