"""The episode's transaction list and the cheap ways a tick reads it.

Every tick scans transactions several times (pending ones, this tick's, one by id), and an
episode makes hundreds. Two facts of the ledger keep those reads short without changing what
they return: a transaction is stamped with the tick it is made in and the list only grows, so
any tick's transactions are a tail; and ``settle`` leaves nothing pending from earlier ticks, so
pending ones lie after a watermark. Ids are ``T`` + the list position, so a lookup is an index.
"""

from __future__ import annotations

from env.fraud.world import Names, Txn, World

txn_id = Names(lambda n: f"T{n:04d}").__getitem__
"""``txn_id(n)``: the id of the n-th transaction (a tick makes several), formatted once."""


class TxnBook:
    """Mixin of ``Engine``: makes transactions and finds them (``w``, ``_n``, ``_settled`` are
    the engine's)."""

    w: World
    _n: int  # transactions made so far (the next id's number - 1)
    _settled: int  # every transaction before this index is past pending

    def _txn(self, kind: str, account: str, merchant: str | None, amount: float, **kw) -> Txn:
        self._n += 1
        txn = Txn(txn_id(self._n), self.w.tick, kind, account, merchant, None, round(amount, 2))
        for key, value in kw.items():
            setattr(txn, key, value)
        self.w.txns.append(txn)
        return txn

    def pending(self) -> list[Txn]:
        return [t for t in self.w.txns[self._settled :] if t.status == "pending"]

    def _mark_settled(self) -> None:
        """Move the watermark past every earlier tick (``settle`` has just cleared them)."""
        txns, done, tick = self.w.txns, self._settled, self.w.tick
        while done < len(txns) and txns[done].tick < tick:
            done += 1
        self._settled = done

    def _this_tick(self) -> list[Txn]:
        """This tick's transactions, in order."""
        return self._since(self.w.tick)

    def _since(self, tick: int) -> list[Txn]:
        """The transactions made at ``tick`` or later: the ledger's tail, in order."""
        txns = self.w.txns
        start = len(txns)
        while start > 0 and txns[start - 1].tick >= tick:
            start -= 1
        return txns[start:]

    def find_txn(self, txn_id: str) -> Txn | None:
        """The transaction with this id, or None: an index, not a scan of the ledger."""
        digits = txn_id[1:]
        if txn_id[:1] != "T" or not (digits.isascii() and digits.isdigit()):
            return None
        txns, i = self.w.txns, int(digits) - 1
        if 0 <= i < len(txns) and txns[i].id == txn_id:
            return txns[i]
        return None

    def public_txn(self, txn: Txn) -> dict:
        return {
            "id": txn.id,
            "tick": txn.tick,
            "kind": txn.kind,
            "account": txn.account,
            "merchant": txn.merchant,
            "amount": txn.amount,
            "status": txn.status,
        }
