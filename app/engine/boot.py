"""Starts the model registry from settings. app.engine (and so vllm) is imported here, lazily,
so a server without models, and commands that need no engine, never pay for the import."""

from __future__ import annotations

from app.core.config import Settings


class NoModels:
    """The registry of a server started with --no-models (nothing is served, so every batch
    fails validation with model_not_found) or --api-only (it runs no batches itself)."""

    ready = True

    def model_cards(self) -> list[dict]:
        return []

    def endpoints_for(self, model: str) -> set[str]:
        return set()

    def validate_line(self, endpoint: str, body: dict):
        from app.engine import LineProblem

        return LineProblem(
            "model_not_found",
            f"The model {body.get('model')!r} does not exist: this server runs no models.",
            "body.model",
        )

    def suggested_concurrency(self, model: str) -> int:
        return 1

    async def shutdown(self) -> None:
        return None


async def start_registry(settings: Settings):
    if settings.no_models:
        return NoModels()
    from app.engine import resolve_model_specs
    from app.engine.serving import start_serving

    specs = resolve_model_specs(settings.models, settings.model_config_file, data_dir=settings.data_dir)
    return await start_serving(specs)
