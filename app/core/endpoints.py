"""The batch endpoints batchd can run, and the one way to spell them.

Batch lines name an endpoint by URL. OpenAI uses ``/v1/chat/completions``;
Azure OpenAI's batch files use ``/chat/completions``; vLLM mounts score and
rerank at ``/score`` and ``/rerank`` as well as under ``/v1``. Everything inside
batchd compares the canonical ``/v1/...`` form returned by
:func:`normalize_endpoint`.
"""

from __future__ import annotations

CHAT_COMPLETIONS = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
EMBEDDINGS = "/v1/embeddings"
SCORE = "/v1/score"
RERANK = "/v1/rerank"
RESPONSES = "/v1/responses"
# Speech to text, as vLLM serves it; a batch line names its audio with `file_url` (vLLM
# run-batch's format), never an uploaded `file`.
TRANSCRIPTIONS = "/v1/audio/transcriptions"
TRANSLATIONS = "/v1/audio/translations"
# Anthropic's Messages API, as vLLM serves it; the lines of Message Batches.
MESSAGES = "/v1/messages"

ALL_ENDPOINTS: frozenset[str] = frozenset(
    {CHAT_COMPLETIONS, COMPLETIONS, EMBEDDINGS, SCORE, RERANK, RESPONSES, MESSAGES, TRANSCRIPTIONS, TRANSLATIONS}
)

# What an OpenAI batch (`/v1/batches`) may name as its endpoint, in the order a refusal lists them;
# Message Batches alone run MESSAGES.
OPENAI_BATCH_ENDPOINTS: tuple[str, ...] = (
    CHAT_COMPLETIONS,
    COMPLETIONS,
    EMBEDDINGS,
    SCORE,
    RERANK,
    RESPONSES,
    TRANSCRIPTIONS,
    TRANSLATIONS,
)

# Which endpoints a vLLM engine serves, keyed by the task names vLLM reports
# from `get_supported_tasks()` (mirrors the routers `vllm serve` registers).
GENERATE_ENDPOINTS: frozenset[str] = frozenset({CHAT_COMPLETIONS, COMPLETIONS, RESPONSES, MESSAGES})
EMBED_ENDPOINTS: frozenset[str] = frozenset({EMBEDDINGS})
SCORING_ENDPOINTS: frozenset[str] = frozenset({SCORE, RERANK})
AUDIO_ENDPOINTS: frozenset[str] = frozenset({TRANSCRIPTIONS, TRANSLATIONS})


def normalize_endpoint(url: str) -> str | None:
    """Return the canonical ``/v1/...`` form of a batch endpoint, or None if unknown.

    Accepts ``/v1/x`` and Azure-style ``/x``, tolerating a trailing slash and
    a query string, which some clients leave on the URL.
    """
    if not isinstance(url, str):
        return None
    if url in ALL_ENDPOINTS:  # canonical already: every line the worker runs
        return url
    path = url.split("?", 1)[0].strip().rstrip("/")
    if not path.startswith("/"):
        path = "/" + path
    if not path.startswith("/v1/"):
        path = "/v1" + path
    return path if path in ALL_ENDPOINTS else None


# The Usage API endpoint that reports an endpoint's lines: text generation under `completions`,
# speech to text (seconds of audio) under `audio_transcriptions`, pooling (embeddings, score,
# rerank: input tokens only) under `embeddings`.
USAGE_COMPLETIONS = "completions"
USAGE_EMBEDDINGS = "embeddings"
USAGE_AUDIO_TRANSCRIPTIONS = "audio_transcriptions"


def usage_kind(endpoint: str) -> str:
    if endpoint in GENERATE_ENDPOINTS:
        return USAGE_COMPLETIONS
    return USAGE_AUDIO_TRANSCRIPTIONS if endpoint in AUDIO_ENDPOINTS else USAGE_EMBEDDINGS
