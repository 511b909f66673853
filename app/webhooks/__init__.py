"""Webhooks as OpenAI sends them: batch events written to an outbox in the transaction that ends
the batch, then delivered (signed per Standard Webhooks, retried with backoff) by a background
sender that never blocks the worker."""
