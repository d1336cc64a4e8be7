"""docs/own-model.md stays true: its module and card are written as the page shows them, and its
commands run as written (`solve` exactly, in the fast lane; `serve` with its request in the slow
lane, compared by structure: tests/doc_pages.py)."""

import shutil
from pathlib import Path

import pytest

from tests.doc_examples import check, page_cpus_available
from tests.doc_pages import Kind, examples, files

PAGE = Path(__file__).resolve().parents[1] / "docs" / "own-model.md"
EXAMPLES = examples(PAGE)


def test_the_page_shows_its_module_and_card_whole_and_uses_them():
    shown = files(PAGE)
    assert set(shown) == {"my_tts.py", "my-tts.yaml"}
    assert "factory: my_tts:encoder" in shown["my-tts.yaml"]
    assert "def encoder(" in shown["my_tts.py"] and "import torch" in shown["my_tts.py"]
    commands = [c for e in EXAMPLES for c in e.commands if c.is_planner]
    assert {c.subcommand for c in commands} == {"solve", "serve"}
    assert all("--config" in c.argv and "my-tts.yaml" in c.argv for c in commands)


@pytest.mark.parametrize("example", [
    pytest.param(e, id=e.name, marks=[] if e.kind is Kind.EXACT else [pytest.mark.slow])
    for e in EXAMPLES])
def test_the_page_example_prints_what_the_page_shows(example, tmp_path):
    if not page_cpus_available():
        pytest.skip("the page's examples were made seeing CPUs 0 and 1; this process may not "
                    "use both, and `solve` counts them")
    if example.serves:
        pytest.importorskip("torch", reason="serving the page's model needs the serve extra")
        if shutil.which("curl") is None or shutil.which("file") is None:
            pytest.skip("the example runs curl and file, which this machine lacks")
    problems = check(example, tmp_path)
    assert not problems, ("docs/own-model.md differs from the command's output (if the change "
                          "is meant, run `python -m tests.doc_examples --update "
                          "docs/own-model.md`):\n" + "\n\n".join(problems))
