"""The dashboard's vendoring step: pinned integrity, only the listed files, a no-op when done."""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from tools import vendor


def tarball(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def pin(data: bytes) -> dict[str, object]:
    return {
        "name": "lib",
        "version": "1.0.0",
        "tarball": "https://registry.example/lib-1.0.0.tgz",
        "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
        "files": {"package/dist/lib.js": "lib.js", "package/LICENSE": "lib.LICENSE"},
    }


DATA = tarball({"package/dist/lib.js": b"lib()", "package/LICENSE": b"MIT", "package/evil.js": b"x"})


def test_given_matching_tarball_when_vendored_then_only_listed_files_written_and_second_run_fetches_nothing(
    tmp_path: Path,
) -> None:
    fetched: list[str] = []

    def fetch(url: str) -> bytes:
        fetched.append(url)
        return DATA

    assert vendor.vendor([pin(DATA)], tmp_path, fetch) is True
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != vendor.STAMP) == ["lib.LICENSE", "lib.js"]
    assert (tmp_path / "lib.js").read_bytes() == b"lib()"
    assert vendor.vendor([pin(DATA)], tmp_path, fetch) is False
    assert len(fetched) == 1


def test_given_tampered_tarball_when_vendored_then_refused_and_nothing_marked_done(tmp_path: Path) -> None:
    other = tarball({"package/dist/lib.js": b"evil()", "package/LICENSE": b"MIT"})
    with pytest.raises(vendor.VendorError, match="integrity mismatch"):
        vendor.vendor([pin(DATA)], tmp_path, lambda url: other)
    assert not vendor.up_to_date([pin(DATA)], tmp_path)


def test_given_a_pin_change_when_vendored_then_fetched_again(tmp_path: Path) -> None:
    vendor.vendor([pin(DATA)], tmp_path, lambda url: DATA)
    newer = tarball({"package/dist/lib.js": b"lib2()", "package/LICENSE": b"MIT"})
    assert vendor.vendor([pin(newer)], tmp_path, lambda url: newer) is True
    assert (tmp_path / "lib.js").read_bytes() == b"lib2()"


def test_given_the_repository_pins_then_each_is_sha512_with_a_license_file() -> None:
    for package in vendor.load_pins():
        assert package["integrity"].startswith("sha512-")
        assert any(name.endswith("LICENSE") for name in package["files"].values()), package["name"]
