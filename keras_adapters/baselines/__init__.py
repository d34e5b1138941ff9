"""The paper's "no BERT" baseline: an AutoML search over heads on TF Hub text embeddings.

`hub_text_embedding`, `glove` and `universal_sentence_encoder` build TF Hub-format text
embeddings from PyPI packages (`embeddings` names them and builds them into the cache);
`search_space` is the paper's Table 5; `deep_and_wide` builds one configuration's model;
`tuner` drives keras-tuner over it; `automl` runs a whole search and `tfidf_floor` the
TF-IDF + logistic regression floor.
"""
