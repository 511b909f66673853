"""Anthropic Message Batches over the batch machinery, and their results."""
