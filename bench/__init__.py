"""Benchmarks: each compares Tally against the design of its seed post in the same run."""
