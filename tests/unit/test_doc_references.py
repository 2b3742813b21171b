"""The README and docs/ name only code that exists: every module path (`chalicelib/core/retry.py`,
`tools/gateway.py`, `core/catalog.py`), every dotted reference in backticks (`core.pager.query_page`,
`stream_apply.apply_item`, `Settings.from_env`, `counters/keys.event_position`), every module
run as a command (`python -m bench.cost`), every test named by its file (`tests/...py::test_...`)
and every link to another doc. Code is read with ast, never imported."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE_ROOTS = ("chalicelib", "tools", "bench", "tests")
PACKAGES = tuple(p.name for p in (ROOT / "chalicelib").iterdir() if (p / "__init__.py").exists())

PATH = re.compile(r"(?<![\w/.-])((?:chalicelib|tools|bench|tests|" + "|".join(PACKAGES) + r")/[\w/]*?\w+\.py)\b")
TICKED = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?")
# A module path and a name in it: `counters/keys.event_position`.
PATH_NAME = re.compile(r"(?<![\w/.-])((?:chalicelib/)?(?:" + "|".join(PACKAGES) + r")/\w+\.[A-Za-z_]\w*)\b")
# A module run as a command: `python -m tools.local_stack`.
RUN_MODULE = re.compile(r"-m ((?:tools|bench)(?:\.\w+)+)")
# A test named in its file: `tests/functional/x/test_y.py::test_given_...`.
TEST_NAME = re.compile(r"(tests/[\w/]+\.py)::(\w+)")
LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")
# Dotted words in backticks that are not Python: browser and AWS names, JSON fields, example hosts.
NOT_CODE = {
    "navigator",
    "window",
    "history",
    "localStorage",
    "requestContext",
    "DestinationConfig",
    "stages",
    "lambda_functions",
    "others",
    "blog",
    "news",
    "www",
    "shop",
    "visitors",
    "document.referrer",
}
FILE_SUFFIXES = {"js", "json", "txt", "toml", "zip", "html", "css", "md", "yml", "yaml", "cfg"}


def doc_lines() -> Iterator[tuple[str, str]]:
    for doc in DOCS:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            yield f"{doc.relative_to(ROOT)}:{number}", line


@cache
def python_files() -> list[Path]:
    found = [ROOT / "app.py"]
    for root in CODE_ROOTS:
        found += [p for p in (ROOT / root).rglob("*.py") if ".venv" not in p.parts]
    return found


@cache
def defined_names(path: Path) -> dict[str, set[str]]:
    """Top-level names of a module, each with the names its class body defines (empty for the rest)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = set()
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    members.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    members |= {t.id for t in item.targets if isinstance(t, ast.Name)}
            names[node.name] = members
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names[node.name] = set()
        elif isinstance(node, ast.Assign):
            targets = [e for t in node.targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            names.update({t.id: set() for t in targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = set()
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update({(a.asname or a.name).split(".")[0]: set() for a in node.names})
    return names


def modules_named(parts: list[str]) -> list[tuple[Path, list[str]]]:
    """Every module the leading parts of a dotted name can mean, each with the parts left over:
    a full path (`chalicelib.core.pager`), one within chalicelib (`core.pager`), or a module's
    own name (`pager`)."""
    found = []
    for path in python_files():
        relative = path.relative_to(ROOT).with_suffix("").parts
        if relative[-1] == "__init__":
            relative = relative[:-1]
        candidates = [relative]
        if relative[0] == "chalicelib":
            candidates.append(relative[1:])
        candidates.append(relative[-1:])
        for dotted in candidates:
            if dotted and tuple(parts[: len(dotted)]) == dotted:
                found.append((path, parts[len(dotted) :]))
    return found


def resolves(reference: str) -> bool:
    parts = reference.removesuffix("()").split(".")
    for path, rest in modules_named(parts):
        if not rest:
            return True
        names = defined_names(path)
        if rest[0] in names and (len(rest) == 1 or (len(rest) == 2 and rest[1] in names[rest[0]])):
            return True
    # A class and its member, wherever the class is defined (`Settings.from_env`).
    return len(parts) == 2 and any(parts[1] in defined_names(p).get(parts[0], ()) for p in python_files())


def is_code(reference: str) -> bool:
    first, _, last = reference.rpartition(".")
    if reference in NOT_CODE or reference.split(".")[0] in NOT_CODE:
        return False
    return not (last in FILE_SUFFIXES and first)


def module_path_exists(path: str) -> bool:
    if (ROOT / path).is_file():
        return True
    return path.split("/")[0] in PACKAGES and (ROOT / "chalicelib" / path).is_file()


def missing_paths() -> list[str]:
    return [
        f"{where}: {path}" for where, line in doc_lines() for path in PATH.findall(line) if not module_path_exists(path)
    ]


def missing_references() -> list[str]:
    missing = []
    for where, line in doc_lines():
        for module in RUN_MODULE.findall(line):
            if not resolves(module):
                missing.append(f"{where}: python -m {module}")
        for named in PATH_NAME.findall(line):
            if named.rpartition(".")[2] not in FILE_SUFFIXES | {"py"} and not resolves(named.replace("/", ".")):
                missing.append(f"{where}: {named}")
        for ticked in TICKED.findall(line):
            text = ticked.strip()
            if text.endswith(".py"):
                continue  # a file name: the path check above reads it
            if DOTTED.fullmatch(text) and is_code(text) and not resolves(text):
                missing.append(f"{where}: {text}")
    return missing


def missing_tests() -> list[str]:
    missing = []
    for where, line in doc_lines():
        for path, name in TEST_NAME.findall(line):
            if (ROOT / path).is_file() and name not in defined_names(ROOT / path):
                missing.append(f"{where}: {path}::{name}")
    return missing


def broken_links() -> list[str]:
    broken = []
    for doc in DOCS:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            if "://" not in target and not (doc.parent / target).is_file():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
    return broken


def test_given_the_docs_when_module_paths_read_then_each_file_exists() -> None:
    assert missing_paths() == []


def test_given_the_docs_when_dotted_code_references_read_then_each_module_and_name_exists() -> None:
    assert missing_references() == []


def test_given_the_docs_when_tests_named_then_each_is_defined_in_its_file() -> None:
    assert missing_tests() == []


def test_given_the_docs_when_links_to_other_docs_read_then_each_exists() -> None:
    assert broken_links() == []


@pytest.mark.parametrize(
    ("reference", "found"),
    [
        ("core.pager", True),
        ("chalicelib.core.errors.StorageError", True),
        ("Settings.from_env", True),
        ("core.no_such_module", False),
        ("pager.no_such_function", False),
        ("Settings.no_such_method", False),
    ],
)
def test_given_a_reference_when_resolved_then_only_existing_code_is_found(reference: str, found: bool) -> None:
    assert is_code(reference)
    assert resolves(reference) is found


def test_given_module_paths_when_checked_then_a_missing_module_is_reported() -> None:
    assert module_path_exists("chalicelib/core/retry.py") and module_path_exists("core/retry.py")
    assert not module_path_exists("chalicelib/core/no_such_module.py")
    assert not module_path_exists("core/no_such_module.py")
