"""BERT-large's blocks (1,024 wide, 16 heads, 4,096 feed-forward) at 512 tokens train, export
and serve: a Model Garden export with random weights stands in for the Hub model (its own file,
so the suite's other worker runs other files beside it).

Two of BERT-large's 24 blocks: every block runs the same code, so the other 22 would only
multiply the time (six minutes of the suite's on a 2-core AVX2 CPU). What the whole depth costs
at 512 tokens, in time and memory, is `bench/scale.py`'s record (`--shapes=large`)."""

import tensorflow as tf

from tests import long_sequences_test

# BERT's initializer range: wider random weights saturate 24 layers, and the rebuilt encoder
# could not be checked against the Hub model.
_LARGE = dict(num_layers=2, hidden_size=1024, num_attention_heads=16, intermediate_size=4096,
              random_stddev=0.02)


class BertLargeTest(tf.test.TestCase):

  def test_bert_large_blocks_at_512_tokens_train_two_steps_export_and_serve(self):
    """Two training steps (attention recomputed, as --recompute_attention=auto does at this
    length) and the SavedModel serving strings. Scoring, which traces the model once more
    (an eighth of this test's time), and exactness at 512 tokens are long_sequences_test's."""
    long_sequences_test.train_export_and_serve(
        self, self.create_tempdir().full_path, num_train=2, batch_size=1, score=False,
        **_LARGE)


if __name__ == "__main__":
  tf.test.main()
