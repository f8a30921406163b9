"""The README and docs/ link to each other by relative paths and #anchors; a page that moves or a heading that is
renamed breaks them silently on GitHub. These tests resolve every such link, and keep the README a front door."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

README_MAX_BYTES = 12 * 1024  # the README is the front door; details belong in docs/

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[(?:[^\[\]\n]|\[[^\[\]\n]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")  # [a [b] c](target)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def repository_root() -> Path:
    """The folder holding pyproject.toml above this file (tests may sit one folder deeper by tier)."""
    here = Path(__file__).resolve().parent
    return next(folder for folder in (here, *here.parents) if (folder / "pyproject.toml").exists())


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code: a `[x](y)` inside code is not a link."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: link syntax and markup dropped, lowercase, punctuation removed, spaces to -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a page offers: its headings' slugs (repeats get -1, -2, ...) and explicit <a id=...>."""
    text = page.read_text(encoding="utf-8")
    found: set[str] = set(HTML_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for heading in HEADING.findall(FENCE.sub("", text)):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    """The relative links of a Markdown page whose file or #anchor does not exist, as 'target: why'."""
    broken = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if SCHEME.match(target):
            continue  # http(s), mailto: not checked here (no network in tests)
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading or anchor '{anchor}' in {linked.name}")
    return broken


def documentation_pages() -> list[Path]:
    root = repository_root()
    return [root / "README.md", root / "CHANGELOG.md", *sorted((root / "docs").rglob("*.md"))]


def test_every_relative_link_and_anchor_resolves():
    pages = documentation_pages()
    assert all(page.exists() for page in pages), [str(page) for page in pages if not page.exists()]
    broken = {page.name: broken_links(page) for page in pages}
    assert not any(broken.values()), {name: links for name, links in broken.items() if links}


def test_the_checker_finds_a_broken_file_and_a_broken_anchor(tmp_path):
    (tmp_path / "other.md").write_text('# A `code` heading: yes\n\n## Twice\n\n## Twice\n\n<a id="bib"></a>\n')
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-code-heading-yes) [ok](other.md#twice-1) [ok](other.md#bib) [ok](#top)\n"
        "# Top\n[bad](missing.md) [bad](other.md#nowhere) `[code](ignored.md)` [web](https://x.org/y)\n"
        "[[Key]](other.md#bib) [[Key]](#gone)\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#nowhere: no heading or anchor 'nowhere' in other.md",
        "#gone: no heading or anchor 'gone' in page.md",
    ]


def test_the_readme_stays_a_front_door():
    size = (repository_root() / "README.md").stat().st_size
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move details to docs/ (limit {README_MAX_BYTES})"


def test_the_readme_keeps_the_two_commands_ci_runs():
    """.ci/run runs the README's test command; the quickstart command is the first thing a reader runs."""
    readme = (repository_root() / "README.md").read_text(encoding="utf-8")
    assert (
        "pip install torch==2.13.0 && pip install -c constraints.txt -e . && sweeper run search_spaces/quickstart.yaml"
    ) in readme
    assert 'pip install -c constraints.txt -e ".[test]" && python -m pytest -q -n 2' in readme
    ci = (repository_root() / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install -q -c constraints.txt -e ".[test]" && python -m pytest -q -n 2' in ci


def test_the_annotated_space_is_the_quickstart():
    """The README annotates search_spaces/quickstart.yaml: the two must say the same, comments aside."""
    root = repository_root()
    readme = (root / "README.md").read_text(encoding="utf-8")
    [annotated] = re.findall(r"```yaml\n(# yaml-language-server: .*?)```", readme, re.DOTALL)
    shipped = (root / "search_spaces" / "quickstart.yaml").read_text(encoding="utf-8")
    assert annotated.splitlines()[0] == shipped.splitlines()[0]  # the schema line editors read
    assert yaml.safe_load(annotated) == yaml.safe_load(shipped)
