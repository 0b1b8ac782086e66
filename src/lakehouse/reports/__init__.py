"""What a run tells people: the run report, the reports index and their charts.

- `outcome`: what one run or validation did, as the report shows it;
- `pages`: the run report and the reports index, HTML from templates;
- `charts`: the report's inline SVG charts.
"""

__all__ = ["charts", "outcome", "pages"]
