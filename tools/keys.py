"""Access keys from the command line, for a stage's counts table (AWS or the emulator).

    python -m tools.keys create --stage dev --scopes admin [--prefix P] [--origins O ...] [--note N]
    python -m tools.keys list --stage dev
    python -m tools.keys revoke --stage dev --id 0123456789abcdef

(`make admin-key STAGE=dev` creates an admin key; `make deploy` creates one when the stage has
none.) The key is printed once and stored only as its hash. AWS credentials and region come
from the usual places; AWS_ENDPOINT_URL points at an emulator.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import boto3

from chalicelib.access import api_keys, policy
from chalicelib.access import store as key_store
from chalicelib.core import clock
from chalicelib.core.settings import Settings
from tools import stage

LOCAL_ADMIN_KEY = stage.PROJECT / ".tally" / "local-admin-key"


def create(dynamodb: Any, settings: Settings, scopes: list[str], **limits: Any) -> tuple[str, policy.KeyRecord]:
    return key_store.create(dynamodb, settings, policy.parse_new_key({"scopes": scopes, **limits}), clock.now_ms())


def first_admin_key(dynamodb: Any, settings: Settings) -> str | None:
    """A new admin key when the stage has no key at all (its first deploy), else None."""
    if next(key_store.all_keys(dynamodb, settings), None) is not None:
        return None
    return create(dynamodb, settings, ["admin"], note="first admin key")[0]


def local_admin_key(dynamodb: Any, settings: Settings, path: Path = LOCAL_ADMIN_KEY) -> tuple[str, bool]:
    """The local admin key, stored in this (fresh) emulator: the one in `path`, or a new one
    written there. Returns (key, created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    created = False
    try:
        key = path.read_text().strip()
    except FileNotFoundError:
        key = ""
    if not api_keys.is_well_formed(key):
        key = api_keys.generate()
        try:
            with open(path, "x") as out:  # two stacks starting at once keep one key
                out.write(key + "\n")
            os.chmod(path, 0o600)
            created = True
        except FileExistsError:
            key = path.read_text().strip()
    # The highest rate: mock data, the dashboard and the e2e runs all send with this one key.
    new = policy.parse_new_key(
        {"scopes": ["admin"], "note": "local admin key (make run)", "rate_per_second": policy.RATE_MAX}
    )
    key_store.create(dynamodb, settings, new, clock.now_ms(), key=key)
    return key, created


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["create", "list", "revoke"])
    parser.add_argument("--stage", default="dev")
    parser.add_argument("--scopes", nargs="+", default=["admin"], choices=policy.SCOPES)
    parser.add_argument("--prefix", default=None)
    parser.add_argument("--origins", nargs="*", default=[])
    parser.add_argument("--sites", nargs="*", default=[], help="a tracker key's sites (blog.example, *.blog.example)")
    parser.add_argument("--rate", type=int, default=None, help="requests a second (default: the scope's)")
    parser.add_argument("--note", default="")
    parser.add_argument("--id", default=None, help="the key id to revoke")
    parser.add_argument("--region", default=None)
    parser.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL"))
    parser.add_argument("--project-dir", type=Path, default=stage.PROJECT)
    args = parser.parse_args(argv)
    settings = stage.stage_settings(args.stage, args.project_dir)
    session = boto3.session.Session(region_name=args.region)
    dynamodb = session.client("dynamodb", endpoint_url=args.endpoint_url)
    if args.command == "create":
        limits: dict[str, Any] = {"note": args.note}
        if args.prefix is not None:
            limits["prefix"] = args.prefix
        if args.origins:
            limits["origins"] = args.origins
        if args.sites:
            limits["sites"] = args.sites
        if args.rate is not None:
            limits["rate_per_second"] = args.rate
        key, record = create(dynamodb, settings, args.scopes, **limits)
        print(json.dumps({**record.as_dict(), "key": key}, indent=2))
        print("The key is shown this once: keep it. Send it as Authorization: Bearer <key>.", file=sys.stderr)
    elif args.command == "list":
        print(json.dumps([r.as_dict() for r in key_store.all_keys(dynamodb, settings)], indent=2))
    else:
        if not args.id:
            parser.error("revoke needs --id")
        print(json.dumps(key_store.revoke(dynamodb, settings, args.id, clock.now_ms()).as_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
