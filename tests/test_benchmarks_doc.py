"""docs/benchmarks.md holds the current figures of every benchmark script, one section each,
and every place that cites one of its sections by name names a section it has.

The dated lab notes the figures came from live in git (the commit named at the top of the
file); a citation of a section that only the lab notes had would send a reader nowhere.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"

#: ``docs/benchmarks.md, "Section"`` or ``docs/benchmarks.md "Section"``, the path possibly in
#: backticks, the quoted name possibly wrapped over comment or docstring lines. Not
#: ``git show <commit>:docs/benchmarks.md, "..."``: that cites the lab notes, by design.
_CITATION = re.compile(r'(?<![:/\w])docs/benchmarks\.md`*,?\s+(?:#:?\s*)?"([^"]+)"')


def _headings() -> list[str]:
    """The titles of docs/benchmarks.md's headings, backticks kept."""
    return [line.lstrip("#").strip() for line in DOC.read_text().splitlines()
            if line.startswith("#")]


def _names_a_heading(name: str, titles: list[str]) -> bool:
    """A cited name is a heading's title, or the part of it before ``: ``, ``; `` or `` (``."""
    return any(title == name or title.startswith((f"{name}: ", f"{name}; ", f"{name} ("))
               for title in titles)


def _citations() -> list[tuple[str, str]]:
    """``(file, cited name)`` for every citation of a section of docs/benchmarks.md."""
    found = []
    for path in sorted(ROOT.rglob("*")):
        if path.suffix not in (".py", ".md") or path in (DOC, Path(__file__).resolve()):
            continue
        rel = path.relative_to(ROOT)
        if rel.parts[0] in (".git", "node_modules", "build") or "node_modules" in rel.parts:
            continue
        text = path.read_text(errors="replace")
        for m in _CITATION.finditer(text):
            name = re.sub(r"\s*\n\s*(?:#:?\s*)?", " ", m.group(1)).strip()
            found.append((str(rel), name))
    return found


def test_every_benchmark_script_has_a_section_in_benchmarks_md_named_by_it():
    titles = "\n".join(_headings())
    scripts = sorted(p.name for p in (ROOT / "benchmarks").glob("bench_*.py"))
    scripts.append("compare_revisions.py")
    assert len(scripts) > 10
    missing = [s for s in scripts if s not in titles]
    assert missing == [], f"benchmarks without a section in docs/benchmarks.md: {missing}"


def test_every_citation_of_a_benchmarks_md_section_names_a_section_it_has():
    titles = _headings()
    citations = _citations()
    assert len(citations) > 20  # the code and docs cite it throughout: the scan must see them
    dangling = [(f, n) for f, n in citations if not _names_a_heading(n, titles)]
    assert dangling == [], f"citations of sections docs/benchmarks.md does not have: {dangling}"


def _slug(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def test_every_link_into_benchmarks_md_lands_on_a_heading():
    slugs = {_slug(t) for t in _headings()}
    links = []
    for path in [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]:
        for anchor in re.findall(r"benchmarks\.md#([\w\-]+)", path.read_text()):
            links.append((str(path.relative_to(ROOT)), anchor))
    assert links, "docs/spark.md links into docs/benchmarks.md: the scan must see it"
    assert [(f, a) for f, a in links if a not in slugs] == []


def test_benchmarks_md_names_the_commit_that_holds_the_lab_notes():
    head = "\n".join(DOC.read_text().splitlines()[:10])
    assert re.search(r"`git show [0-9a-f]{7,40}:docs/benchmarks\.md`", head)


def test_a_citation_split_over_comment_lines_is_read_whole():
    text = 'see (docs/benchmarks.md, "Reads of 1,024\n#: entries") and ``docs/benchmarks.md``,\n"X"'
    names = [re.sub(r"\s*\n\s*(?:#:?\s*)?", " ", m.group(1)) for m in _CITATION.finditer(text)]
    assert names == ["Reads of 1,024 entries", "X"]


def test_a_citation_of_the_lab_notes_by_commit_is_not_a_section_citation():
    text = '(`git show 97dc67c:docs/benchmarks.md`, "Gateway node")'
    assert list(_CITATION.finditer(text)) == []


def test_a_cited_name_is_a_heading_or_the_heading_before_its_detail():
    titles = ["Apply lag: `benchmarks/bench_apply_lag.py`", "Peer messages written; a lone writer",
              "Peer transport (`bench_grpc_stream.py`)", "Reads"]
    assert _names_a_heading("Apply lag", titles)
    assert _names_a_heading("Peer messages written", titles)
    assert _names_a_heading("Peer transport", titles)
    assert _names_a_heading("Reads", titles)
    assert not _names_a_heading("Read", titles)
    assert not _names_a_heading("Change 20", titles)
    assert _slug("Spark bulk applier: `benchmarks/bench_spark.py`") == (
        "spark-bulk-applier-benchmarksbench_sparkpy")
