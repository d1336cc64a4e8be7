"""The frontend's pure half: espeak-ng's clause rules and piper's id layout (no extra needed)."""

from __future__ import annotations

from models.piper.text import Clause, clauses, has_speech, normalise, sentence_phonemes, to_ids


def _split(text):
    return [(c.text, c.terminator, c.sentence_end) for c in clauses(text)]


def test_commas_semicolons_and_colons_end_clauses_not_sentences():
    assert _split("One, two; three: four.") == [
        ("One", ",", False), ("two", ";", False), ("three", ":", False), ("four", ".", True)]


def test_runs_of_sentence_marks_end_a_sentence_with_their_first_mark():
    assert _split("Really?! Yes!!! Fine.") == [
        ("Really", "?", True), ("Yes", "!", True), ("Fine", ".", True)]


def test_a_period_before_a_lower_case_word_ends_nothing_but_before_a_capital_it_does():
    assert _split("See you at 10 a.m. tomorrow.") == [("See you at 10 a.m. tomorrow", ".", True)]
    # as espeak does, even after a title
    assert _split("Ask Dr. Smith.") == [("Ask Dr", ".", True), ("Smith", ".", True)]


def test_ellipsis_and_spaced_dashes():
    assert _split("Wait... then go — now.") == [
        ("Wait", "", False), ("then go", ";", False), ("now", ".", True)]
    assert _split("Well… fine – ok") == [("Well", "", False), ("fine", ";", False),
                                          ("ok", ".", True)]


def test_punctuation_inside_words_and_numbers_ends_nothing():
    assert _split("Pi is 3.14, at 10:30 with 1,000 people") == [
        ("Pi is 3.14", ",", False), ("at 10:30 with 1,000 people", ".", True)]


def test_unterminated_text_is_one_sentence_and_blank_clauses_are_dropped():
    assert _split("  hello   world ") == [("hello world", ".", True)]
    assert _split("...") == []
    assert _split("") == []


def test_normalise_makes_one_line():
    assert normalise("a\nb\t\u0007c\u00a0d") == "a b c d"


def test_sentence_phonemes_join_clauses_like_piper():
    pairs = [(Clause("hello", ",", False), "həlˈoʊ"), (Clause("world", ".", True), "wˈɜːld"),
             (Clause("go", "!", True), "(en)ɡˈoʊ(us)")]
    assert sentence_phonemes(pairs) == ["həlˈoʊ, wˈɜːld.", "ɡˈoʊ!"]


def test_ids_are_bos_pad_each_symbol_then_pad_then_eos_and_unknown_symbols_are_skipped():
    id_map = {"^": [1], "$": [2], "_": [0], "a": [14], "b": [15], " ": [3]}
    assert to_ids("ab a", id_map) == [1, 0, 14, 0, 15, 0, 3, 0, 14, 0, 2]
    assert to_ids("a☃", id_map) == [1, 0, 14, 0, 2]


def test_has_speech():
    assert has_speech("wˈɜːld.") and not has_speech(". , !") and not has_speech("")
