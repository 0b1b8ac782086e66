"""Shared plumbing every job uses: settings, the Spark session and Delta I/O.

Business logic lives in `jobs/`; nothing here knows about impressions or clicks.
"""
