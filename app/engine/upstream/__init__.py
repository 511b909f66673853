"""Models served by existing OpenAI-compatible servers (``vllm serve``, SGLang, TGI, ...):
batchd brings files, batches and durability; the upstream fleet does the inference.

- :mod:`app.engine.config.upstream`: what an upstream model is (``--model NAME=URL``, the
  ``upstream:`` block).
- :mod:`.targets`: one URL's state (AIMD window, rotation) and the least-outstanding choice.
- :mod:`.transport`: one line's request, with retries, backoff and its deadline.
- :mod:`.discovery`: ``GET {url}/models`` at start and periodically: health, and the LoRA
  adapters the URL lists on the model.
- :mod:`.registry`: :class:`UpstreamRegistry`, the :class:`~app.engine.protocol.Engines` of
  upstream-backed models.
"""
