"""The fixed sentences the intelligibility tests speak, and the bound they must meet."""

SENTENCES = [
    "The quick brown fox jumped over the lazy dog.",
    "We will meet again next week to discuss the new project.",
    "Please call me back when you get home tonight.",
    "The weather today is cold and rainy in the city.",
    "She sells fresh bread at the market every morning.",
    "Turn left at the next corner and walk two blocks.",
]
WER_LIMIT = 0.30
