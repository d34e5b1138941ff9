"""The projections of a BERT block that the methods change, by name: plain Python, so the
configs that name them load on Keras 2 and Keras 3 alike."""

# The projections of a BERT block, under the Model Garden's sub-layer names.
PROJECTIONS = ("query", "key", "value", "attention_output", "intermediate", "output")
# The pooler's dense projection (before its tanh), once per encoder: peft's "dense" matches
# `bert.pooler.dense` beside the blocks' dense layers.
POOLER = "pooler"
# What a method's `target_modules` may name.
TARGETS = PROJECTIONS + (POOLER,)


def projection_widths(target, hidden_size, intermediate_size):
  """`(input width, output width)` of the projection `target` (`TARGETS`)."""
  if target not in TARGETS:
    raise ValueError(f"Unknown projection {target!r}; a BERT encoder has {list(TARGETS)}.")
  return {"intermediate": (hidden_size, intermediate_size),
          "output": (intermediate_size, hidden_size)}.get(target, (hidden_size, hidden_size))
