"""Load test: many concurrent API clients against one `batchd serve` while batches run."""
