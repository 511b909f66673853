"""Webhook endpoints, the outbox of events and their signed delivery."""
