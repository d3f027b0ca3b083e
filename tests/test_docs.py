"""The README and the docs cite only files that exist: every figure has its committed file
behind it, and a deleted result cannot stay quoted."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "cost_models").rglob("*.md"))]
REPO_PATH = re.compile(r"`((?:benchmarks|cost_models|scripts|tvm_eqsat|rules|tests|docs)/[^`\s(]*)")
RESULT_NAME = re.compile(r"`((?:llvm|cuda|search|fuzz|layers|family|held-out|extract|peak|bandwidth|validation|seeds|quick|"
                         r"layout|conv|cold|ms-overhead)-[\w.+-]*\.(?:md|csv|json|png|json\.gz))`")  # fmt: skip
PLACEHOLDER = re.compile(r"[<>\[\]{}*]|\.\.\.")


def cited() -> dict[str, set[str]]:
    """Each file a document cites (as a repository path, or as a results file's name) -> the documents."""
    found: dict[str, set[str]] = {}
    for doc in DOCS:
        text = doc.read_text()
        paths = [m.rstrip(".,:;") for m in REPO_PATH.findall(text)]
        paths += [f"benchmarks/results/{m}" for m in RESULT_NAME.findall(text)]
        for path in paths:
            if not PLACEHOLDER.search(path):
                found.setdefault(path, set()).add(doc.name)
    return found


def test_every_cited_file_exists():
    found = cited()
    assert len(found) > 50  # the patterns still find what the documents cite
    missing = {path: sorted(docs) for path, docs in found.items() if not (ROOT / path).exists()}
    assert not missing, f"cited but not in the repository: {missing}"


def test_readme_counts_the_rules_the_library_holds():
    """The README's rule and family counts are the library's (they had fallen 14 rules and a
    family behind it)."""
    from tvm_eqsat.rules import load_library

    counted = re.search(r"(\d+) rules in (\d+) families", (ROOT / "README.md").read_text())
    library = load_library()
    assert counted and (int(counted[1]), int(counted[2])) == (len(library.rules), len(library.families))
