"""Build ``batchd-tiny-chat``: a tiny, seeded Llama-architecture chat model.

It exists so that batchd can serve a real chat model (weights on disk, a real
tokenizer with a chat template, loaded by vLLM like any hub checkpoint) on a
machine with no network and no GPU. Its weights are random, so its text is
gibberish by design; with ``temperature=0`` it is deterministic.

The build is deterministic (fixed seed, fixed corpus) and takes a second or two.
"""

from __future__ import annotations

from pathlib import Path

from app.engine.config.atomic_folder import build_folder

TINY_CHAT_NAME = "batchd-tiny-chat"

_SEED = 20240611
_VOCAB_SIZE = 512


class TinyChatShape:
    """The model's dimensions (``batchd-tiny-lora`` is built to fit them)."""

    HIDDEN = 128
    LAYERS = 2
    HEADS = 2
    KV_HEADS = 1
    # vLLM's CPU attention rejects small head sizes (16); 64 is supported.
    HEAD_DIM = 64


BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
_ROLE_TOKENS = ["<|system|>", "<|user|>", "<|assistant|>", "<|tool|>"]

# Role markers are special tokens so a prompt costs few tokens; the template
# only reads `content` as a string, which lets vLLM flatten OpenAI content
# parts ("string" content format) before rendering.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% endif %}"
    "{{ eos_token }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)

# Small built-in corpus: enough variety for a few hundred byte-level merges.
_CORPUS = """\
The quick brown fox jumps over the lazy dog. A batch is a file of requests;
each line names a custom id, a method, a url and a body. The server reads the
file, runs every request through the model and writes one result per line.
Hello! How are you today? I am fine, thank you. What is two plus two? Four.
Please summarize the following text in one sentence. Translate this into
French. Write a short poem about the sea, the wind and the morning light.
Embeddings map sentences to vectors; similar sentences land close together.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 1000 2024. Punctuation: , . ; : ! ? ( ) [ ] { }
"quoted" 'single' - _ / \\ @ # $ % ^ & * + = < > | ~ `
system user assistant tool function name arguments content role message
The weather is sunny with a chance of rain later in the afternoon.
Once upon a time there was a small model that could only babble.
"""


def build_tiny_chat_model(dest: Path) -> Path:
    """Build the model into ``dest`` unless it is already there; return ``dest``."""
    return build_folder(dest, _write)


def _write(folder: Path) -> None:
    _write_tokenizer(folder)
    _write_model(folder)


def _write_tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = [PAD, BOS, EOS, *_ROLE_TOKENS]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=_VOCAB_SIZE,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS.splitlines(), trainer=trainer)
    # Plain prompts (completions, tokenizer(text)) start with BOS like Llama's;
    # chat prompts get it from the template and vLLM renders them without
    # special tokens.
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A",
        pair=f"{BOS} $A {BOS} $B",
        special_tokens=[(BOS, tok.token_to_id(BOS))],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=_ROLE_TOKENS,
        model_max_length=2048,
        chat_template=CHAT_TEMPLATE,
    )
    fast.save_pretrained(folder)


def _write_model(folder: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(folder)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=TinyChatShape.HIDDEN,
        intermediate_size=256,
        num_hidden_layers=TinyChatShape.LAYERS,
        num_attention_heads=TinyChatShape.HEADS,
        num_key_value_heads=TinyChatShape.KV_HEADS,
        head_dim=TinyChatShape.HEAD_DIM,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    # Seed a private generator state so building never perturbs the caller's RNG.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_SEED)
        model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(folder, safe_serialization=True)
