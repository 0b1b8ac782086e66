"""Data quality: Great Expectations checkpoints between the stages.

- `suite`: a table's suite (`src/lakehouse/quality/suites/`), read, checked and
  rendered with the catalog's rules;
- `runner`: Great Expectations as the engine that runs them (`QualityGate`), with Data Docs
  (`data_docs`: their pages made inert);
- `validate`: a layer's checkpoint, table by table, each with its suite's scopes;
- `scopes`: which rows each scope sees, and how they are read;
- `derived`: the checks of frames derived from a run (reconciliation, late drops);
- `results`: the record of every outcome (`_meta/dq_results`);
- `ledger`: the ingest ledger, lines read per source, which reconciliation
  holds against bronze and quarantine.
"""

__all__ = [
    "data_docs",
    "derived",
    "ledger",
    "results",
    "runner",
    "scopes",
    "suite",
    "validate",
]
