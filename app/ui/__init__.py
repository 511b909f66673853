"""The web dashboard at `/ui`: a static page and vanilla JS over the `/v1` API, served offline."""

from app.ui.routes import install_ui

__all__ = ["install_ui"]
