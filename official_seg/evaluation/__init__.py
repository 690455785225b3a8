"""Evaluation stages: exact metrics and their records."""
