"""Diagnostic: what one decision-branch GRPO update does to the rate and to the reading.

With decision branches and ``decision_tokens`` credit, a group's two replies open ``close_alert``
and ``file_sar`` on the same case and the decision's advantage (+a on the right branch, -a on the
wrong one) lands on the one token where the openings part. Since log-softmax normalisers cancel,
that pair's gradient is ``a * y * grad d``, where ``d = logit(close) - logit(file)`` at the parting
position and ``y`` is +1 on a clean case (closing is right), -1 on a suspicious one. A batch's
update is the sum of those over its cases.

This script takes a policy (a PEFT adapter), computes ``d`` and its gradient over the LoRA
weights at balanced train decision cuts, and the gradients of the held-out mean ``d`` (the rate:
every case's log-odds moving together) and of mean ``d`` on clean minus suspicious held-out cuts
(the reading). It reports the first-order effect on both of one unit-length update built from the
train cases, for plain SGD and for the sign of the update (Adam's first step), under two credits:

- ``constant``: every case weighs the same (``a`` = 1), as ``decision_tokens`` credit does;
- ``likelihood``: a case weighs ``2 * P(wrong decision)`` (``sigmoid(-y d)``), the gradient of the
  log-likelihood of the right decision between the two, as ``decision_likelihood`` credit does.

With ``--layer-groups 0-9,20-29`` it also reports the same effects for an update confined to the
LoRA weights of those decoder layers (the rest held still), as a run whose adapter covers only
them would take: whether some layers read the case with less of the shared direction.

It also reports how parallel the cases' gradients are (the cosine between the clean cases' sum
and the suspicious cases' sum): when they share one direction, a balanced batch's update is the
small difference of two large, nearly equal vectors, and any difference in their lengths moves
every case's log-odds together.

    OMP_NUM_THREADS=2 python benchmarks/decision_gradients.py --train-cases 12 --episodes 24 \\
        --stage warm=runs/steps/warm --stage grpo=runs/steps/grpo
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

CREDITS = ("constant", "likelihood")


def parting_tokens(openings: list[list[int]]) -> tuple[list[int], int, int]:
    """The openings' common prefix and their two parting tokens (close, file: sorted order)."""
    k = next(i for i, (x, y) in enumerate(zip(*openings, strict=False)) if x != y)
    return openings[0][:k], openings[0][k], openings[1][k]


def parting_gradient(model: Any, params: list[Any], ids: list[int], close: int, file: int):
    """``d`` = logit(close) - logit(file) after ``ids`` and its gradient over ``params``."""
    import torch

    model.zero_grad(set_to_none=True)
    logits = model(input_ids=torch.tensor([ids]), logits_to_keep=1).logits[0, -1].float()
    d = logits[close] - logits[file]
    d.backward()
    return float(d.detach()), torch.cat([p.grad.detach().flatten().float() for p in params])


def case_weights(labels: list[int], margins: list[float], credit: str) -> list[float]:
    """Per train case (label 1: suspicious), the signed weight ``y * w`` of its ``grad d``."""
    import math

    out = []
    for label, d in zip(labels, margins, strict=True):
        y = -1.0 if label else 1.0
        w = 1.0 if credit == "constant" else 2.0 / (1.0 + math.exp(y * d))  # 2 sigmoid(-y d)
        out.append(y * w)
    return out


def update_effects(
    grads: list[Any], labels: list[int], margins: list[float], rate: Any, reading: Any
) -> dict[str, Any]:
    """First-order effects on the held-out rate and reading of one unit update per credit and
    optimizer (``sgd``: the update's direction; ``sign``: its signs, Adam's first step)."""
    import torch

    out: dict[str, Any] = {}
    for credit in CREDITS:
        weights = case_weights(labels, margins, credit)
        update = sum(w * g for w, g in zip(weights, grads, strict=True))
        for name, u in (("sgd", update), ("sign", torch.sign(update))):
            u = u / u.norm()
            out[f"{credit}_{name}"] = {"rate": float(rate @ u), "reading": float(reading @ u)}
    clean, suspicious = (sum(part) for part in by_class(grads, labels))
    out["cos_clean_suspicious"] = float(clean @ suspicious / clean.norm() / suspicious.norm())
    norms = by_class([float(g.norm()) for g in grads], labels)
    out["grad_norm_clean"], out["grad_norm_suspicious"] = (_mean(part) for part in norms)
    return out


_LAYER = re.compile(r"\.layers\.(\d+)\.")


def parse_groups(spec: str | None) -> dict[str, tuple[int, int]]:
    """``"0-9,26-29"`` -> ``{"0-9": (0, 9), "26-29": (26, 29)}`` (inclusive layer ranges)."""
    groups = {}
    for part in filter(None, (spec or "").split(",")):
        low, _, high = part.strip().partition("-")
        first, last = int(low), int(high or low)
        if first > last:
            raise ValueError(f"layer group {part!r}: its first layer is after its last")
        groups[part.strip()] = (first, last)
    return groups


def group_indices(
    shapes: list[tuple[str, int]], groups: dict[str, tuple[int, int]]
) -> dict[str, list[int]]:
    """Per group, the positions in the flattened gradient (parameters in ``shapes`` order, each
    ``(name, numel)``) of the parameters whose decoder layer lies in the group's range."""
    out: dict[str, list[int]] = {name: [] for name in groups}
    start = 0
    for name, numel in shapes:
        found = _LAYER.search(name)
        for group, (first, last) in groups.items():
            if found and first <= int(found.group(1)) <= last:
                out[group].extend(range(start, start + numel))
        start += numel
    empty = [group for group, positions in out.items() if not positions]
    if empty:
        raise ValueError(f"layer groups {empty} hold no LoRA weights")
    return out


def by_class(values: list[Any], labels: list[int]) -> tuple[list[Any], list[Any]]:
    """``values`` split into the clean cases' (label 0) and the suspicious cases'."""
    pairs = list(zip(values, labels, strict=True))
    return [v for v, lab in pairs if not lab], [v for v, lab in pairs if lab]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def stage_effects(
    path: str,
    train: list[dict],
    held: list[dict],
    groups: dict[str, tuple[int, int]] | None = None,
) -> dict[str, Any]:
    """Load ``path``, score every cut, return the margins and ``update_effects`` (also per
    layer group, under ``"groups"``)."""
    import torch

    from benchmarks.probe_decision import prompt_texts
    from pipeline.decoding.trainer_sampling import branch_openings
    from pipeline.evaluation.backends import CheckpointBackend, GenerationSettings

    backend = CheckpointBackend(
        path, GenerationSettings(prompt_style="compact", train_template=True)
    )
    tok, model = backend.tokenizer, backend.model
    named = [(name, p) for name, p in model.named_parameters() if "lora_" in name]
    if not named:
        raise ValueError(f"{path}: no LoRA weights to take gradients of")
    params = [p for _, p in named]
    positions = group_indices([(n, p.numel()) for n, p in named], groups or {})
    for p in params:
        p.requires_grad_(True)
    prefix, close, file = parting_tokens(branch_openings(tok, ["close_alert", "file_sar"]))

    def score(rows: list[dict]) -> tuple[list[float], list[Any]]:
        texts = prompt_texts(tok, rows)
        ids = [tok(t, add_special_tokens=False)["input_ids"] + prefix for t in texts]
        pairs = [parting_gradient(model, params, i, close, file) for i in ids]
        return [d for d, _ in pairs], [g for _, g in pairs]

    started = time.perf_counter()
    held_d, held_g = score(held)
    train_d, train_g = score(train)
    clean, suspicious = by_class(held_g, [r["verdict"] for r in held])
    rate = sum(held_g) / len(held_g)
    reading = sum(clean) / len(clean) - sum(suspicious) / len(suspicious)
    labels = [r["verdict"] for r in train]
    train_clean, train_suspicious = by_class(train_d, labels)
    confined = {}
    for group, where in positions.items():
        idx = torch.tensor(where)
        sub = [g[idx] for g in train_g]
        confined[group] = update_effects(sub, labels, train_d, rate[idx], reading[idx])
    return {
        "path": path,
        "seconds": round(time.perf_counter() - started, 1),
        "train_margins": train_d,
        "held_margins": held_d,
        "train_mean_d": {"clean": _mean(train_clean), "suspicious": _mean(train_suspicious)},
        **update_effects(train_g, labels, train_d, rate, reading),
        "groups": confined,
    }


def balanced_train_rows(per_class: int) -> list[dict]:
    """The first ``per_class`` clean and suspicious AML-easy train decision cuts."""
    from benchmarks.probe_decision import decision_rows

    n = 4 * per_class
    while True:
        rows = decision_rows(n, "train")
        clean = [r for r in rows if not r["verdict"]][:per_class]
        suspicious = [r for r in rows if r["verdict"]][:per_class]
        if len(clean) == len(suspicious) == per_class:
            return clean + suspicious
        n *= 2


def markdown(stages: dict[str, dict[str, Any]], command: str, n_train: int, n_held: int) -> str:
    from benchmarks.results import machine

    lines = [
        "## decision_gradients: what one decision-branch update does to the rate and the reading",
        "",
        f"`{command}` — per stage, at {n_train} balanced AML-easy train decision cuts and "
        f"{n_held} held-out ones: first-order change of the held-out mean opening log-odds "
        "(rate) and of its clean-minus-suspicious gap (reading) per unit update, for the "
        "constant decision credit (every case +-1) and the likelihood credit (each case "
        "weighted by 2 P(wrong decision)); `sgd` the update itself, `sign` its signs (Adam's "
        "first step). cos: between the clean cases' and the suspicious cases' summed gradients.",
        "",
        "| stage | train d clean / susp | cos | grad norm clean / susp | credit | sgd rate | "
        "sgd reading | sign rate | sign reading |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, stage in stages.items():
        parts = {name: stage} | {
            f"{name} [layers {group}]": {**effects, "train_mean_d": stage["train_mean_d"]}
            for group, effects in stage.get("groups", {}).items()
        }
        for label, s in parts.items():
            for credit in CREDITS:
                sgd, sign = s[f"{credit}_sgd"], s[f"{credit}_sign"]
                lines.append(
                    f"| {label} | {s['train_mean_d']['clean']:+.2f} / "
                    f"{s['train_mean_d']['suspicious']:+.2f} | {s['cos_clean_suspicious']:.3f} | "
                    f"{s['grad_norm_clean']:.1f} / {s['grad_norm_suspicious']:.1f} | {credit} | "
                    f"{sgd['rate']:+.2f} | {sgd['reading']:+.2f} | {sign['rate']:+.2f} | "
                    f"{sign['reading']:+.2f} |"
                )
    lines += ["", f"Measured on {machine()}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", action="append", required=True, help="name=adapter path")
    parser.add_argument("--train-cases", type=int, default=12, help="train cuts per class")
    parser.add_argument("--episodes", type=int, default=24, help="held-out decision cuts")
    parser.add_argument(
        "--layer-groups", help="also confine the update to these decoder layers, e.g. 0-9,20-29"
    )
    parser.add_argument("--output", type=Path, help="JSON with every margin and figure")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args(argv)
    from benchmarks.probe_decision import decision_rows
    from benchmarks.results import publish

    groups = parse_groups(args.layer_groups)
    train, held = balanced_train_rows(args.train_cases), decision_rows(args.episodes, "eval")
    stages = {}
    for spec in args.stage:
        name, _, path = spec.partition("=")
        stages[name] = stage_effects(path, train, held, groups)
        print(json.dumps({name: {k: v for k, v in stages[name].items() if "margins" not in k}}))
    if args.output:
        args.output.write_text(json.dumps(stages, indent=1))
    command = "python benchmarks/decision_gradients.py " + " ".join(argv or sys.argv[1:])
    text = markdown(stages, command.strip(), len(train), len(held))
    publish("decision_gradients", text, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
