"""The command lines: training, comparisons, studies, exports and conversions.

Each module is one command, installed as a console script and runnable as
`python -m keras_adapters.cli.<module>` (the repository's `experiments/<module>.py` runs the
same):

| Console script                   | Module               |
|----------------------------------|----------------------|
| `keras-adapters-classify`        | `run_classification` |
| `keras-adapters-glue`            | `run_glue`           |
| `keras-adapters-squad`           | `run_squad`          |
| `keras-adapters-automl`          | `run_automl`         |
| `keras-adapters-analysis`        | `run_analysis`       |
| `keras-adapters-export-multitask`| `export_multitask`   |
| `keras-adapters-convert`         | `convert_adapterhub` |
| `keras-adapters-snli-as-mnli`    | `snli_as_mnli`       |

`cli`, `common_flags`, `task_flags` and `interruption` are what they share. Nothing here is
imported by the rest of the package: this is its top layer.
"""
