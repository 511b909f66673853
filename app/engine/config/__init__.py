"""What a process serves, decided before any engine starts (no vLLM here): :mod:`.specs`
(``--model`` strings, the config file, :class:`~app.engine.config.specs.ModelSpec`),
:mod:`.upstream` (the ``upstream:`` block, :class:`~app.engine.config.upstream.UpstreamSpec`),
:mod:`.catalog` (the built-in models and the resolution rules), :mod:`.tiny_chat` and
:mod:`.tiny_whisper` (the files of the built-in chat and speech models).
"""
