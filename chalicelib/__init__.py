"""Tally's logic: everything app.py calls into."""
