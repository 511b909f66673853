"""Deterministic batch input lines for the workloads: chat prompts, sentences to embed, and
document Q&A prompts that share a long per-document prefix. Everything derives from a
``random.Random`` the caller seeds, so one seed gives byte-identical files on any machine."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from pathlib import Path

CHAT_URL = "/v1/chat/completions"
EMBEDDINGS_URL = "/v1/embeddings"

_WORDS = (
    "the a of and to in is that for it as with was on be by at this from or an are "
    "batch file line model engine token server request result output input memory queue "
    "river mountain city harbor forest garden market library station bridge valley island "
    "red green blue silver golden quiet bright ancient modern small large early late "
    "walks builds reads writes carries opens closes follows counts measures records sends "
    "morning evening winter summer spring autumn storm cloud rain wind light shadow "
    "engineer teacher farmer sailor painter doctor pilot baker writer student captain "
    "report letter story map recipe ledger journal contract invoice schedule manual "
    "because while after before during until although since unless whenever"
).split()

_QUESTIONS = (
    "What is the main subject of the document?",
    "Who is mentioned first in the document?",
    "Which place appears most often?",
    "Summarize the second paragraph in one sentence.",
    "What happens at the end of the document?",
    "List three objects the document mentions.",
    "What season is described?",
    "Which numbers appear in the document?",
    "What does the engineer do?",
    "Is there a storm in the document?",
    "Name one color used in the text.",
    "What is recorded in the ledger?",
    "Where does the story take place?",
    "Who sends the letter?",
    "What is measured and by whom?",
    "Which bridge is named?",
    "Give a title for the document.",
    "What is the tone of the document?",
    "Which sentence is the longest?",
    "What would you ask the author?",
)
QUESTIONS_PER_DOCUMENT = len(_QUESTIONS)


def sentence(rng: random.Random, min_words: int = 6, max_words: int = 18) -> str:
    """A pseudo-English sentence of ``min_words``..``max_words`` words."""
    words = [rng.choice(_WORDS) for _ in range(rng.randint(min_words, max_words))]
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words)), str(rng.randint(2, 9999)))
    return " ".join(words).capitalize() + "."


def chat_lines(n: int, rng: random.Random, model: str, *, max_tokens: int, prefix: str = "chat") -> Iterator[dict]:
    """``n`` short chat requests, each generating exactly ``max_tokens`` tokens."""
    for i in range(n):
        text = " ".join(sentence(rng) for _ in range(rng.randint(1, 3)))
        yield _line(
            f"{prefix}-{i}",
            CHAT_URL,
            {
                "model": model,
                "messages": [{"role": "user", "content": text}],
                "max_tokens": max_tokens,
                "ignore_eos": True,
                "temperature": 0,
            },
        )


def embedding_lines(n: int, rng: random.Random, model: str, *, prefix: str = "emb") -> Iterator[dict]:
    """``n`` embedding requests of one or two sentences each."""
    for i in range(n):
        text = " ".join(sentence(rng) for _ in range(rng.randint(1, 2)))
        yield _line(f"{prefix}-{i}", EMBEDDINGS_URL, {"model": model, "input": text})


def documents(n: int, rng: random.Random, tokenizer_file: Path, tokens: int) -> list[str]:
    """``n`` distinct documents of about ``tokens`` tokens each for the given tokenizer."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    docs = []
    for d in range(n):
        paragraphs: list[str] = []
        while sum(len(p) for p in paragraphs) < tokens * 6:  # ample text; cut by tokens below
            paragraphs.append(" ".join(sentence(rng) for _ in range(rng.randint(3, 6))))
        text = f"Document {d}.\n\n" + "\n\n".join(paragraphs)
        ids = tokenizer.encode(text, add_special_tokens=False).ids[:tokens]
        docs.append(tokenizer.decode(ids))
    return docs


def doc_qa_lines(docs: list[str], rng: random.Random, model: str, *, max_tokens: int, prefix: str = "qa") -> list[dict]:
    """Every question about every document, shuffled: the document comes first (system
    message) and the question last, so lines about one document share a long prefix."""
    lines = [
        _line(
            f"{prefix}-{d}-{q}",
            CHAT_URL,
            {
                "model": model,
                "messages": [
                    {"role": "system", "content": f"Answer questions about this document.\n\n{doc}"},
                    {"role": "user", "content": question},
                ],
                "max_tokens": max_tokens,
                "ignore_eos": True,
                "temperature": 0,
            },
        )
        for d, doc in enumerate(docs)
        for q, question in enumerate(_QUESTIONS)
    ]
    rng.shuffle(lines)
    return lines


def write_jsonl(path: Path, lines: Iterable[dict]) -> int:
    """Write ``lines`` as JSONL; return how many were written."""
    count = 0
    with path.open("w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json.dumps(line, separators=(",", ":")) + "\n")
            count += 1
    return count


def _line(custom_id: str, url: str, body: dict) -> dict:
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}
