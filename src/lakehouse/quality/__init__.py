"""Data quality: Great Expectations checkpoints between the stages.

- `gate`: the suites (`src/lakehouse/quality/suites/`, rendered with the catalog's rules) and
  Great Expectations as the engine that runs them, with Data Docs;
- `validate`: a layer's checkpoint, table by table, each with its suite's scopes;
- `scopes`: which rows each scope sees, and how they are read;
- `derived`: the checks of frames derived from a run (reconciliation, late drops);
- `results`: the record of every outcome (`_meta/dq_results`);
- `ledger`: the ingest ledger, lines read per source, which reconciliation
  holds against bronze and quarantine.
"""

__all__ = ["derived", "gate", "ledger", "results", "scopes", "validate"]
