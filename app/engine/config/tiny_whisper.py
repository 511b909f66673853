"""Build ``batchd-tiny-whisper``: a tiny, seeded Whisper-architecture speech model.

The speech counterpart of ``batchd-tiny-chat``: a real encoder-decoder checkpoint
(weights on disk, a Whisper tokenizer with Whisper's special tokens, a
``WhisperFeatureExtractor``) that vLLM loads like any hub Whisper, built offline.
Its weights are random, so its transcripts are gibberish by design; with
``temperature=0`` they are deterministic, which is what the audio-line tests need.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.engine.config.atomic_folder import build_folder

TINY_WHISPER_NAME = "batchd-tiny-whisper"

_SEED = 20240612
_BPE_VOCAB_SIZE = 384

EOT = "<|endoftext|>"
# Whisper's fixed special tokens (after the language tokens, as in the real vocabulary).
_TASK_TOKENS = [
    "<|translate|>",
    "<|transcribe|>",
    "<|startoflm|>",
    "<|startofprev|>",
    "<|nocaptions|>",
    "<|notimestamps|>",
]

_CORPUS = """\
The quick brown fox jumps over the lazy dog. Hello, how are you today?
Please transcribe this recording; the speaker talks about the weather.
It is sunny with a chance of rain later in the afternoon. Thank you.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100. Punctuation: , . ; : ! ? - ' "
Bonjour, comment allez-vous? Guten Tag. Hola, buenos dias. Ciao.
"""


def build_tiny_whisper_model(dest: Path) -> Path:
    """Build the model into ``dest`` unless it is already there; return ``dest``."""
    return build_folder(dest, _write)


def _write(folder: Path) -> None:
    _write_processor(folder)
    _write_model(folder)


def _special_tokens() -> list[str]:
    from transformers.models.whisper.tokenization_whisper import LANGUAGES

    languages = [f"<|{code}|>" for code in LANGUAGES]
    return ["<|startoftranscript|>", *languages, *_TASK_TOKENS]


def _write_processor(folder: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import WhisperFeatureExtractor, WhisperProcessor, WhisperTokenizer

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=_BPE_VOCAB_SIZE,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_CORPUS.splitlines(), trainer=trainer)
    trained = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in trained["merges"]]
    tokenizer = WhisperTokenizer(vocab=trained["vocab"], merges=merges, model_max_length=448)
    tokenizer.add_special_tokens({"additional_special_tokens": _special_tokens()})
    extractor = WhisperFeatureExtractor(feature_size=80, sampling_rate=16000)
    WhisperProcessor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(folder)


def _write_model(folder: Path) -> None:
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration, WhisperTokenizer

    tokenizer = WhisperTokenizer.from_pretrained(folder)
    eot = tokenizer.convert_tokens_to_ids(EOT)
    config = WhisperConfig(
        vocab_size=len(tokenizer),
        num_mel_bins=80,
        d_model=128,
        encoder_layers=1,
        decoder_layers=1,
        # vLLM's CPU attention needs head size 64 (128 / 2).
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=256,
        decoder_ffn_dim=256,
        # 30 s of audio at Whisper's hop is 3000 frames, halved by the conv stem.
        max_source_positions=1500,
        max_target_positions=448,
        decoder_start_token_id=tokenizer.convert_tokens_to_ids("<|startoftranscript|>"),
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        begin_suppress_tokens=None,
        suppress_tokens=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_SEED)
        model = WhisperForConditionalGeneration(config).to(torch.float32)
    model.save_pretrained(folder, safe_serialization=True)
