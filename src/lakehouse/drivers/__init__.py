"""Drivers: thin jobs that read, transform, validate and write, each run by a CLI command.

- `bronze`: landing files -> bronze and quarantine (`lakehouse run`, first layer);
- `tables`: silver and gold, one `availableNow` query per catalog table;
- `streaming`: one `Trigger.AvailableNow` query run to completion, and what it reports;
- `pipeline`: one incremental run, each query followed by its checks (`lakehouse run`);
- `backfill`: the same transforms in batch over date ranges (`lakehouse backfill`);
- `late`: the dates late rows touched, for `backfill --pending`;
- `parity`: streaming against batch, row for row (`lakehouse parity`);
- `recovery`: new checkpoints without loss or duplicates (`lakehouse recover`, `migrate`);
- `maintain`: compaction, VACUUM and report retention (`lakehouse maintain`).
"""

__all__ = [
    "backfill",
    "bronze",
    "late",
    "maintain",
    "parity",
    "pipeline",
    "recovery",
    "streaming",
    "tables",
]
