"""The searchable compliance manual (public text; the same for every case)."""

from __future__ import annotations

import re

SECTIONS: tuple[tuple[str, str], ...] = (
    (
        "Structuring",
        "Structuring splits cash into deposits just below the reporting threshold, often across "
        "branches, days or third-party depositors. Compare the deposits with the threshold and "
        "check the source of funds. A cash-intensive business with verified till records, "
        "seasonal peaks and reported large deposits (CTR references) is a common false positive.",
    ),
    (
        "Layering",
        "Layering moves funds quickly through accounts to hide their origin: a large incoming "
        "wire followed within days by outgoing wires that are forwarded again. Request a wire "
        "trace of the incoming payment to see the true originator and trace the network. A "
        "company funding its own payroll from its operating account also moves money fast: "
        "salaries to individuals on a schedule are a common false positive.",
    ),
    (
        "Trade-based laundering",
        "Trade-based laundering disguises value transfers as trade: invoices priced far above "
        "the market (over-invoicing) or payments for goods that never shipped (phantom "
        "shipments). Verify the customs declaration of each invoice and compare the unit price "
        "with the market price. Forged declarations can pass customs matching; trade scrutiny "
        "mode adds the shipping-manifest check.",
    ),
    (
        "Money mule rings",
        "Mule rings recruit account holders who receive funds from many unrelated senders and "
        "forward them to a collector. Shared devices link the accounts; new accounts and many "
        "distinct senders are the red flags. Family members sharing a tablet at one address, "
        "with small household transfers, are a common false positive.",
    ),
    (
        "Sanctions evasion",
        "Sanctioned persons hide behind chains of companies. Query the beneficial ownership of "
        "the customer's company up to the natural person at the top and screen that person "
        "against the watchlist. A confirmed match needs name and date of birth; a partial name "
        "match with a different date of birth is not a match. Standard due diligence shows two "
        "ownership layers; enhanced due diligence shows the whole chain.",
    ),
    (
        "Rule modes",
        "update_system_prompt switches the monitoring rule mode: standard; enhanced_due_diligence "
        "(full ownership chains, source-of-funds document detail); structuring_watch (flags "
        "cash deposits within 20 percent below the threshold and daily cash totals); "
        "trade_scrutiny (shipping-manifest check on customs verification); network_expansion "
        "(second-hop flows in trace_network).",
    ),
    (
        "Working memory and the case file",
        "Only the last tool results stay in working memory. Write important ids to the case "
        "file: referencing an id that scrolled out and is not in the case file is a page fault. "
        "Wire traces are asynchronous: retrieve them after their ETA or the request times out.",
    ),
    (
        "Filing and closing",
        "File a SAR with the typology, every entity involved and findings that cite the "
        "evidence ids (transactions, invoices, declarations, devices, watchlist entries, trace "
        "and document references). Close an alert with a reason that cites the evidence that "
        "explains the activity.",
    ),
)
_WORDS = [set(re.findall(r"[a-z]+", (t + " " + b).lower())) for t, b in SECTIONS]


def search(query: str, limit: int = 2) -> list[dict[str, str]]:
    """The sections sharing the most words with ``query``."""
    words = set(re.findall(r"[a-z]+", query.lower()))
    scored = sorted(
        ((len(words & ws), i) for i, ws in enumerate(_WORDS)), key=lambda x: (-x[0], x[1])
    )
    return [
        {"title": SECTIONS[i][0], "text": SECTIONS[i][1]} for score, i in scored[:limit] if score
    ]
