"""Checkers for the labs, one module per lab. Each raises lh.CheckFailed with a message that says what to change."""
