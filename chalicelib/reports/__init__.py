"""Scheduled reports: what arrived since the last report, per counter with exact sums, written to
S3 as JSON and CSV. How runs are bounded and tile time: docs/design.md, "Reports"."""
