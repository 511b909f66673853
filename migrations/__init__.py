"""batchd's Alembic migrations, installed as the `batchd_migrations` package (setup.py)."""
