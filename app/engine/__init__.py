"""batchd's engine layer: the only package that imports vLLM.

- :mod:`.protocol`: :class:`~app.engine.protocol.Engines`, the interface every caller types
  against; :mod:`.results` and :mod:`.errors`, the values and exceptions it hands out.
- :mod:`.config`: what to serve (``--model``, the config file, the built-in models).
- :mod:`.local`: models run in this process by vLLM's ``AsyncLLM``.
- :mod:`.upstream`: models served by OpenAI-compatible servers over HTTP.
- :mod:`.multiplexer`: local and upstream models side by side.
- :mod:`.boot`: what a process starts with, from its settings.

Only :mod:`.local` imports vLLM and torch, lazily reached through :mod:`.boot`, so
validating config, handling results or serving upstream models never pays for them.
"""
