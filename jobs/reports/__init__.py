"""What a run tells people: progress, the event log and the report pages.

- `progress`: what one query did (rows in and out, late drops, state);
- `monitoring`: every micro-batch's progress in `_meta/query_progress`, and state sizes;
- `outcome`: what one run or validation did, as the report shows it;
- `pages`: the run report and the reports index, HTML from templates.
"""

__all__ = ["monitoring", "outcome", "pages", "progress"]
