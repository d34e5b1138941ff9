"""Small SQuAD v1.1 files in the official format, in the tiny test vocab, for fast tests."""

import json
import random


def write_tiny_squad(path, context_lengths=(6, 12, 20, 40), seed=0):
  """Writes one question per context and returns `path`.

  Contexts are random words of the tiny vocab, w0-w39; question `q<i>`'s answer is two words
  of its own, `w<50 + 2i> w<51 + 2i>`, so a model that learns where answers are answers every
  question exactly. The 40-word context puts its answer after word 30, past the first window
  of a 32-token model.

  Args:
    path: The JSON file to write.
    context_lengths: Words of each context before its answer is inserted (at most 5).
    seed: Seed of the words.
  """
  rng = random.Random(seed)
  paragraphs = []
  for index, length in enumerate(context_lengths):
    words = [f"w{rng.randrange(40)}" for _ in range(length)]
    answer = [f"w{50 + 2 * index}", f"w{51 + 2 * index}"]
    position = 30 if length > 30 else rng.randrange(length)
    words[position:position] = answer
    paragraphs.append(dict(context=" ".join(words), qas=[dict(
        id=f"q{index}", question=f"w{rng.randrange(40)} w{rng.randrange(40)}",
        answers=[dict(text=" ".join(answer),
                      answer_start=len(" ".join(words[:position])) + (1 if position else 0))])]))
  with open(path, "w", encoding="utf-8") as f:
    json.dump({"version": "1.1", "data": [{"title": "tiny", "paragraphs": paragraphs}]}, f)
  return path
