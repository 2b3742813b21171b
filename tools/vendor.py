"""Fetch the dashboard's pinned browser libraries from the npm registry, check them, unpack them.

    python -m tools.vendor            # what `make vendor` runs (run, test and package depend on it)

Each package in tools/vendor.json is pinned by version and by the sha512 integrity the registry
publishes for its tarball; a download that does not match is refused. The listed files (the
built library and its license) go to chalicelib/dashboard/vendor/, which is not committed and is
shipped inside the Lambda package with the rest of chalicelib. A stamp file makes a second run
with the same pins a no-op, so the step costs nothing once done. Only Python is needed (no node).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import sys
import tarfile
import urllib.request
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent
PINS = PROJECT / "tools" / "vendor.json"
TARGET = PROJECT / "chalicelib" / "dashboard" / "vendor"
STAMP = ".pins"
MAX_TARBALL_BYTES = 20 * 1024 * 1024


class VendorError(RuntimeError):
    """A pinned package could not be fetched or does not match its pin."""


def load_pins(path: Path = PINS) -> list[dict[str, Any]]:
    packages: list[dict[str, Any]] = json.loads(path.read_text())["packages"]
    return packages


def check_integrity(data: bytes, integrity: str) -> None:
    """`integrity` is a Subresource Integrity string as npm publishes it: sha512-<base64>."""
    algorithm, _, expected = integrity.partition("-")
    if algorithm != "sha512":
        raise VendorError(f"only sha512 integrity pins are accepted, got {algorithm!r}")
    actual = base64.b64encode(hashlib.sha512(data).digest()).decode()
    if actual != expected:
        raise VendorError(f"integrity mismatch: pinned sha512-{expected}, downloaded sha512-{actual}")


def extract(data: bytes, files: dict[str, str], target: Path) -> None:
    """Write the listed members of a .tgz to target under their new names (nothing else)."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member_name, output_name in files.items():
            if "/" in output_name or output_name.startswith("."):
                raise VendorError(f"output name {output_name!r} must be a plain file name")
            member = archive.getmember(member_name)
            if not member.isfile():
                raise VendorError(f"{member_name} is not a regular file in the tarball")
            source = archive.extractfile(member)
            assert source is not None
            (target / output_name).write_bytes(source.read())


def download(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            data: bytes = response.read(MAX_TARBALL_BYTES + 1)
    except OSError as exc:
        raise VendorError(f"could not download {url}: {exc}") from exc
    if len(data) > MAX_TARBALL_BYTES:
        raise VendorError(f"{url} is larger than {MAX_TARBALL_BYTES} bytes")
    return data


def stamp_text(packages: list[dict[str, Any]]) -> str:
    return json.dumps(packages, sort_keys=True)


def up_to_date(packages: list[dict[str, Any]], target: Path) -> bool:
    stamp = target / STAMP
    if not stamp.is_file() or stamp.read_text() != stamp_text(packages):
        return False
    return all((target / name).is_file() for p in packages for name in p["files"].values())


def vendor(packages: list[dict[str, Any]], target: Path = TARGET, fetch: Any = download) -> bool:
    """Bring target up to date with the pins; returns False when it already was."""
    if up_to_date(packages, target):
        return False
    target.mkdir(parents=True, exist_ok=True)
    (target / STAMP).unlink(missing_ok=True)
    for package in packages:
        data = fetch(package["tarball"])
        check_integrity(data, package["integrity"])
        extract(data, package["files"], target)
    (target / STAMP).write_text(stamp_text(packages))
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    packages = load_pins()
    try:
        changed = vendor(packages)
    except VendorError as exc:
        print(f"vendor: {exc}", file=sys.stderr)
        return 1
    names = ", ".join(f"{p['name']}@{p['version']}" for p in packages)
    print(f"vendor: {names} {'installed' if changed else 'up to date'} in {TARGET.relative_to(PROJECT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
