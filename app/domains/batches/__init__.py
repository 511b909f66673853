"""Batches: create, list, cancel, delete, retry and their results."""
