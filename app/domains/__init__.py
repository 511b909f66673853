"""Feature domains: each holds its routes, schemas, rules (service) and SQL (repository)."""
