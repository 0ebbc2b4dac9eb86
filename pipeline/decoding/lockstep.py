"""Play many model episodes at once: each turn's replies are decoded together.

A checkpoint policy decodes one reply at a time, so on a CPU an interactive evaluation costs the
sum of every turn of every episode (untrained SmolLM2 on AML easy: ~51 s an episode, 100 held-out
seeds ~85 min). Here every episode runs in its own thread with the unchanged ``ModelPolicy`` and
``env.rollout.play``; their ``complete`` calls meet in ``LockstepBackend``, which waits until every
live episode asks for a reply (or has finished) and answers them all with one batched greedy
``pipeline.decoding.batch_generation.generate``: the system prompt and tool schemas are encoded once, the
rows are decoded together. Greedy decoding of a row does not depend on its batch, so the episodes
are the ones sequential play gives (tests compare them).

Each episode's keys and values are kept from one turn to the next (``pipeline.decoding.kv_rows``), so a
turn encodes only the reply and tool result it adds, not the whole conversation again: by the
tenth AML turn a conversation is ~4k tokens, of which ~400 are new.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import env as registry
from env.rollout import Episode, play
from pipeline.decoding.activation import activation_start, invocation_of
from pipeline.decoding.kv_rows import RowKV, SharedPrefix

ROW_CACHE_BYTES = 6 * 2**30
"""Keys and values kept for the episodes' next turns, at most (SmolLM2-135M: ~46 kB a token, so
~130k tokens: 16 AML episodes whole, or 100 for their first few turns). Past it, an episode's turn
re-encodes what its last kept cache does not cover."""


@dataclass
class _Request:
    ids: list[int]
    budget: int
    episode: int = field(default_factory=threading.get_ident)
    reply: list[int] = field(default_factory=list)
    done: bool = False
    error: BaseException | None = None


class LockstepBackend:
    """A ``ChatBackend`` over a ``CheckpointBackend`` shared by ``players`` episode threads."""

    def __init__(
        self,
        backend: Any,
        players: int,
        batch_size: int = 32,
        finished: Callable[[list[int]], bool] | None = None,
    ):
        if backend.settings.temperature > 0:
            raise ValueError("lockstep decoding is greedy: use temperature 0")
        self.backend, self.batch_size, self.finished = backend, batch_size, finished
        self.tool_messages_need_ids = backend.tool_messages_need_ids
        self._turn = threading.Condition()
        self._players = players
        self._waiting: list[_Request] = []
        self._prefix: SharedPrefix | None = None
        self._rows: dict[int, RowKV] = {}  # episode thread -> its conversation's keys and values

    def tool_schemas(self, env_name: str) -> list[dict[str, Any]]:
        return self.backend.tool_schemas(env_name)

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, seed: int
    ) -> dict[str, Any] | None:
        """This episode's next reply, decoded with every other live episode's (``seed`` unused:
        greedy)."""
        ids, budget = self.backend.encode(messages, tools)
        if budget <= 0:
            return None
        request = _Request(ids, budget)
        with self._turn:
            self._waiting.append(request)
            self._decode_when_all_wait()
            self._turn.wait_for(lambda: request.done)
        if request.error is not None:
            raise RuntimeError("batched decoding failed") from request.error
        return {"role": "assistant", "content": self.backend.tokenizer.decode(request.reply)}

    def leave(self) -> None:
        """An episode ended: the others no longer wait for it."""
        with self._turn:
            self._players -= 1
            self._rows.pop(threading.get_ident(), None)
            self._decode_when_all_wait()

    def _decode_when_all_wait(self) -> None:
        """Decode every waiting request once no live episode is still playing (lock held)."""
        if not self._waiting or len(self._waiting) < self._players:
            return
        from pipeline.decoding.batch_generation import generate

        batch, self._waiting = self._waiting, []
        tokenizer = self.backend.tokenizer
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        try:
            prompts = [r.ids for r in batch]
            prefix = self._shared_prefix(prompts)
            states: list[RowKV] | None = [] if prefix is not None else None
            replies = generate(
                self.backend.model,
                prompts,
                max(r.budget for r in batch),
                self.backend.stop_ids,
                pad,
                self.batch_size,
                prefix=prefix,
                resume=[self._rows.get(r.episode) for r in batch] if prefix else None,
                states=states,
                finished=self.finished,
                decide=rate.decide if (rate := self.backend.decision_rate) else None,
            )
            if states is not None:
                self._keep(batch, states)
            for request, reply in zip(batch, replies, strict=True):
                request.reply = reply[: request.budget]  # greedy: the shorter budget's prefix
        except Exception as error:  # every waiting episode re-raises it in its own thread
            for request in batch:
                request.error = error
        for request in batch:
            request.done = True
        self._turn.notify_all()

    def _shared_prefix(self, prompts: list[list[int]]) -> SharedPrefix | None:
        """The first batch's common prefix (the system prompt and tools), encoded once; None when
        a prompt does not start with it (then the batch is decoded without kept caches). With an
        activated adapter it ends before the first assistant turn."""
        from pipeline.decoding.batch_generation import common_prefix, encode_prefix

        if self._prefix is None:
            shared = common_prefix(prompts)
            if (invocation := invocation_of(self.backend.model)) is not None:
                shared = min(shared, *(activation_start(p, invocation) for p in prompts))
            if not shared:
                return None
            self._prefix = encode_prefix(self.backend.model, prompts[0][:shared])
        return self._prefix if all(self._prefix.starts(p) for p in prompts) else None

    def _keep(self, batch: list[_Request], states: list[RowKV]) -> None:
        """Keep each episode's newest keys and values while they fit ``ROW_CACHE_BYTES``. With an
        activated adapter only its context's: the turn's reply was read with the adapter on, and
        the next prompt reads it with the adapter off."""
        invocation = invocation_of(self.backend.model)
        for request, state in zip(batch, states, strict=True):
            if invocation is not None and self._prefix is not None:
                start = activation_start(request.ids, invocation)
                state = state.head(start - len(self._prefix.ids))
            old = self._rows.pop(request.episode, None)
            held = sum(r.nbytes for r in self._rows.values())
            if held + state.nbytes <= ROW_CACHE_BYTES:
                self._rows[request.episode] = state
            elif old is not None:  # still covers the start of the next turn
                self._rows[request.episode] = old


def play_lockstep(
    env_name: str,
    backend: Any,
    make_policy: Callable[[Any, int], Any],
    jobs: Sequence[tuple[str, int]],
    batch_size: int = 32,
    finished: Callable[[list[int]], bool] | None = None,
) -> tuple[list[Episode], int]:
    """Play ``(task, seed)`` jobs at once; returns the episodes in job order and the number of
    internal env errors. ``make_policy(lockstep_backend, seed)`` builds each episode's policy;
    ``finished(reply_tokens)`` may end a reply's decoding early (e.g. at a receding-horizon
    turn's first call)."""
    shared = LockstepBackend(backend, len(jobs), batch_size, finished)
    episodes: list[Episode | None] = [None] * len(jobs)
    errors: list[BaseException] = []
    internal = [0] * len(jobs)

    def run(index: int, task: str, seed: int) -> None:
        try:
            environment = registry.make(env_name)
            episodes[index] = play(environment, make_policy(shared, seed), task, seed)
            internal[index] = environment.internal_errors
        except BaseException as error:  # re-raised below, after every thread ended
            errors.append(error)
        finally:
            shared.leave()

    threads = [
        threading.Thread(target=run, args=(i, task, seed), name=f"episode-{task}-{seed}")
        for i, (task, seed) in enumerate(jobs)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return [e for e in episodes if e is not None], sum(internal)
