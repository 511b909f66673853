"""Flex processing: synchronous requests run through the batch queue."""
