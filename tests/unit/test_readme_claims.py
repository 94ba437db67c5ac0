"""Every README promise is backed by a test: tests/data/readme_claims.toml maps each section's
promises (quoted from the README) to the tests that check them. This fails when a section has
no claim, a quote is no longer in its section, or a named test does not exist."""

from __future__ import annotations

import ast
import re
import tomllib
from functools import cache

import pytest

from tests.support.settings import DATA, ROOT

CLAIMS = DATA / "readme_claims.toml"


def normalize(text: str) -> str:
    """Text without Markdown's backticks and emphasis, whitespace collapsed."""
    return " ".join(text.replace("`", "").replace("**", "").split())


def readme_sections() -> dict[str, str]:
    """'## ' and '### ' headings -> their text (a '## ' section includes its '### ' ones)."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    heads = [
        (i, len(m.group(1)), normalize(m.group(2)))
        for i, line in enumerate(lines)
        if (m := re.match(r"^(##+) (.+)$", line))
    ]
    sections = {}
    for n, (start, level, title) in enumerate(heads):
        end = next((i for i, lv, _ in heads[n + 1 :] if lv <= level), len(lines))
        sections[title] = normalize("\n".join(lines[start + 1 : end]))
    return sections


def claims() -> list[dict[str, object]]:
    return tomllib.loads(CLAIMS.read_text(encoding="utf-8"))["claim"]


@cache
def functions_in(path: str) -> frozenset[str]:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    return frozenset(
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test_")
    )


def test_every_readme_section_has_a_claim_with_a_test() -> None:
    covered = {str(c["section"]) for c in claims()}
    missing = [title for title in readme_sections() if title not in covered]
    assert not missing, f"README sections with no claim in {CLAIMS.name}: {missing}"


@pytest.mark.parametrize("claim", claims(), ids=lambda c: str(c["quote"])[:60])
def test_each_claim_is_in_the_readme_and_names_tests_that_exist(claim: dict[str, object]) -> None:
    sections = readme_sections()
    section, quote = str(claim["section"]), normalize(str(claim["quote"]))
    assert section in sections, f"no README section {section!r}"
    assert quote in sections[section], f"{quote!r} is no longer in README section {section!r}"
    tests = claim["tests"]
    assert isinstance(tests, list) and tests, "a claim names at least one test"
    for node in tests:
        path, _, name = str(node).partition("::")
        assert (ROOT / path).is_file(), f"{node}: no file {path}"
        assert name in functions_in(path), f"{node}: no test {name} in {path}"
