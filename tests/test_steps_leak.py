"""Steps prompts must not give the verdict away through the reference's choice of calls.

A steps prompt shows the reference's calls and their results; the results are the evidence the
model should learn to read. Its calls alone (names and arguments, every result removed) must not
predict the hidden verdict: a classifier trained on them may do no better than the majority class
+ 0.05 (5-fold cross-validated logistic regression on the bag of call names, argument values with
ids masked, argument id counts and the number of calls), at every cut type.

Measured on 300 train episodes a cell, as the test does, every environment passes: their
references are verdict-blind. AML runs every family's checks, support always reads the abuse
section, ops' decision cut falls before its first committing action, gang maps every alert and
scores a fixed set of accounts with all four tools before its first flag, and fraud's defender
runs a fixed schedule (monitor, challenge, look around) before it closes the case. The gang
heuristic's adaptive scoring (+0.06 at decision cuts) and the fraud heuristic's "investigate
while the ring shows" (+0.10) leaked before; so did the gang opening's alert count (fixed in
``env/gang/world.py``).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score

import env as registry
from pipeline.data.dataset import build_rows

MARGIN = 0.05
EPISODES = 300
ID = re.compile(r"\b[A-Za-z]{1,4}-?\d+\b")


def call_text(prefix: str) -> str:
    """The calls of a prefix as tokens, with no tool result in them."""
    tokens = []
    calls = json.loads(prefix)
    for call in calls:
        tokens.append(call["tool"])
        for key, value in call["arguments"].items():
            text = value if isinstance(value, str) else json.dumps(value)
            masked = ID.sub("ID", text)
            tokens.append(f"{call['tool']}.{key}={masked[:40]}")
            tokens.append(f"{key}_ids{masked.count('ID')}")
    tokens.append(f"ncalls{len(calls)}")
    return " ".join(t.replace(" ", "_") for t in tokens)


def leak(name: str, cuts: str, episodes: int = EPISODES) -> tuple[float, float]:
    """(classifier accuracy, majority share) of the verdict from the prefixes' calls alone."""
    environment = registry.make(name)
    rows = build_rows(name, None, episodes, "train", mode="steps", cuts=cuts)
    labels = []
    for row in rows:
        environment.reset(seed=row["seed"], task=row["task"] or None)
        labels.append(str(environment.reveal()["clean"]))
    y = np.array(labels)
    majority = max(np.mean(y == v) for v in set(labels))
    if len(set(labels)) < 2:
        return majority, majority
    features = CountVectorizer(token_pattern=r"\S+").fit_transform(
        [call_text(r["prefix"]) for r in rows]
    )
    folds = min(5, min(int(np.sum(y == v)) for v in set(labels)))
    accuracy = cross_val_score(LogisticRegression(max_iter=2000), features, y, cv=folds).mean()
    return float(accuracy), float(majority)


CASES = [(name, cuts) for name in registry.names() for cuts in ("decision", "random:2")]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "cuts"), CASES)
def test_the_calls_of_a_prefix_do_not_predict_the_verdict(name: str, cuts: str) -> None:
    accuracy, majority = leak(name, cuts)
    assert accuracy <= majority + MARGIN, (name, cuts, accuracy, majority)


def test_the_classifier_finds_a_leak_when_there_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe is not blind: the AML heuristic, which stops at the first suspicious family and
    pins its evidence before deciding, is read off its calls alone."""
    import env.aml.policies as aml

    monkeypatch.setitem(aml.REFERENCES, "reference", registry.policies("aml")["heuristic"])
    accuracy, majority = leak("aml", "decision", 150)
    assert accuracy > majority + 0.15
