"""BERT-large's shape (24 layers, 1,024 wide, 16 heads, 4,096 feed-forward) at 512 tokens
trains, exports and serves: a Model Garden export with random weights stands in for the Hub
model (its own file, so the suite's other worker runs other files beside its minutes)."""

import tensorflow as tf

from tests import long_sequences_test

# BERT's initializer range: wider random weights saturate 24 layers, and the rebuilt encoder
# could not be checked against the Hub model.
_LARGE = dict(num_layers=24, hidden_size=1024, num_attention_heads=16, intermediate_size=4096,
              random_stddev=0.02)


class BertLargeTest(tf.test.TestCase):

  def test_bert_large_shape_at_512_tokens_trains_two_steps_exports_and_serves(self):
    """Two training steps (attention recomputed, as --recompute_attention=auto does from 512
    tokens) and the SavedModel serving strings. Scoring, which traces the model once more
    (an eighth of this test's time), and exactness at 512 tokens are long_sequences_test's."""
    long_sequences_test.train_export_and_serve(
        self, self.create_tempdir().full_path, num_train=2, batch_size=1, score=False,
        **_LARGE)


if __name__ == "__main__":
  tf.test.main()
