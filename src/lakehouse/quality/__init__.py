"""Data quality: Great Expectations checkpoints between the stages.

- `gate`: the suites (`src/lakehouse/quality/suites/`, rendered with the catalog's rules) and
  Great Expectations as the engine that runs them, with Data Docs;
- `validate`: which rows of which table each check sees, the reconciliation,
  and the record of every outcome (`_meta/dq_results`);
- `ledger`: the ingest ledger, lines read per source, which reconciliation
  holds against bronze and quarantine.
"""

__all__ = ["gate", "ledger", "validate"]
