"""`planner models` on a terminal: every name that selects a card is what a user copies into
`MODEL` or `--model-path`, so the table never splits one across lines or cuts it short, at the
widths terminals have."""

import pytest
from rich.console import Console

from planner.cards import all_cards
from planner.render.text import render_models


def rendered(width: int) -> list[str]:
    console = Console(width=width, color_system=None)
    with console.capture() as capture:
        render_models(console, all_cards())
    return [line.rstrip() for line in capture.get().splitlines()]


@pytest.mark.parametrize("width", [80, 100])
def test_every_model_path_and_architecture_is_whole_on_one_line(width):
    lines = rendered(width)
    assert all(len(line) <= width for line in lines)
    assert not any("…" in line for line in lines)
    tokens = {token for line in lines for token in line.split()}
    for card in all_cards():
        for name in (card.name, *card.model_paths, *card.architectures, *card.variants):
            assert name in tokens, f"{name} of {card.name} is not whole on one line at {width}"


def test_each_card_lists_its_names_beside_it_one_a_line():
    lines = rendered(80)
    start = next(i for i, line in enumerate(lines) if line.startswith("qwen3-tts "))
    column = lines[start].index("Qwen/Qwen3-TTS-12Hz-0.6B-Base")
    qwen = next(c for c in all_cards() if c.name == "qwen3-tts")
    names = [*qwen.model_paths, *qwen.architectures]
    assert [line[column:].strip() for line in lines[start:start + len(names)]] == names
