"""Where each word lies in its clause's espeak-ng phonemes: the words said alone, lined up with the
phonemes said in context (pure; the espeak-ng case at the end needs the program)."""

from __future__ import annotations

from models.piper.text import Clause, sentence_layout, symbols_before, words
from models.piper.word_spans import spans

from tests.models import needs


def _cut(phonemes: str, alone: list[str]) -> list[str]:
    return [phonemes[a:b] for a, b in spans(alone, phonemes)]


def test_a_word_said_alone_as_in_context_is_its_own_span_with_its_stress_mark():
    assert _cut("aɪ θˈɪŋk ðæt", ["ˈaɪ", "θˈɪŋk", "ðˈæt"]) == ["aɪ", "θˈɪŋk", "ðæt"]


def test_words_espeak_joins_or_says_otherwise_are_split_where_their_phonemes_match():
    # "in the end": espeak-ng joins "in the", and says "the" as ðɪ before a vowel
    assert _cut("ɪnðɪ ˈɛnd", ["ˈɪn", "ðˈə", "ˈɛnd"]) == ["ɪn", "ðɪ", "ˈɛnd"]
    # "e.g. a lot": read "for example", and "a" as ɐ; each spoken word goes to the next word
    assert _cut("fˌɔːɹɛɡzˈæmpəl ɐ lˈɑːt", ["ˌiːdʒˈiː", "ˈeɪ", "lˈɑːt"]) == [
        "fˌɔːɹɛɡzˈæmpəl", "ɐ", "lˈɑːt"]
    # one written word said as several
    assert _cut("æt tˈɛn θˈɜːɾi", ["ˈæt", "tˈɛn θˈɜːɾi"]) == ["æt", "tˈɛn θˈɜːɾi"]


def test_spans_are_in_order_cover_nothing_twice_and_a_word_not_found_is_empty():
    assert spans(["ab", "zz", "cd"], "ab cd") == [(0, 2), (2, 2), (3, 5)]  # empty, after "ab"
    assert spans(["ab"], "") == [(0, 0)] and spans([], "ab") == []


def test_the_sentence_layout_says_where_each_clause_begins_and_ids_follow_symbols():
    pairs = [(Clause("hello", ",", False), "həlˈoʊ"), (Clause("world", ".", True), "wˈɜːld"),
             (Clause("go", "!", True), "(en)ɡˈoʊ(us)")]
    first, second = sentence_layout(pairs)
    assert first.phonemes == "həlˈoʊ, wˈɜːld." and first.clauses == ((0, 0), (1, 8))
    assert second.phonemes == "ɡˈoʊ!" and second.clauses == ((2, 0),)
    assert symbols_before("ab☃c", {"a": [5], "b": [6], "c": [7]}) == [0, 1, 2, 2, 3]
    assert words('"Dr. Smith," said 10:30 -- ok') == [
        ('"Dr.', "Dr"), ('Smith,"', "Smith"), ("said", "said"), ("10:30", "10:30"), ("ok", "ok")]


@needs.espeak
def test_every_written_word_is_found_in_real_espeak_ng_phonemes():
    from models.piper.espeak import Espeak

    espeak = Espeak()
    try:
        clause = "most of the people will meet at 10:30 on Dr. Smith's 3rd birthday"
        said = espeak.phonemes(clause)
        written = [raw for raw, _ in words(clause)]
        alone = espeak.phonemes_each(written)
        assert len(alone) == len(written) and alone[-1] == espeak.phonemes("birthday")
        located = [said[a:b] for a, b in spans(alone, said)]
        assert all(located) and "".join(located).replace(" ", "") == said.replace(" ", "")
    finally:
        espeak.close()
