"""OS tools: the case file, async wire traces, the compliance manual and rule modes.

The reference system's "operating system" for an investigator with a small context: what these
tools change is measured by effect in ``env.aml.memory`` and ``env.aml.grading``.
"""

from __future__ import annotations

from env.aml import manual
from env.aml.memory import Job, RuleMode
from env.base import ToolError, tool


class OSTools:
    """The OS tools of ``AMLEnvironment`` (a mixin listed after the investigation tools)."""

    # ----- OS mechanics ----------------------------------------------------------------------------

    @tool(kind="os")
    def write_to_case_file(self, note: str) -> tuple[dict, str]:
        """Write a note to the case file; the ids it names stay available after memory scrolls.

        Args:
            note: Free text naming the ids worth keeping (e.g. 'C-12345 received T-123456').
        """
        pinned = self.memory.write(note, self.world.ids)
        size = len(self.memory.case_file)
        return {"pinned": pinned, "case_file_ids": size}, f"Case file holds {size} ids."

    @tool(kind="os")
    def request_wire_trace(self, transaction_id: str) -> tuple[dict, str]:
        """Ask the payments team to trace a wire's full route (asynchronous; ETA 2-4 steps).

        Args:
            transaction_id: A wire or trade payment id (T-...).
        """
        t = self.world.txns.get(transaction_id)
        if t is None:
            raise ToolError(f"unknown transaction id {transaction_id!r}")
        if t.channel not in ("wire", "trade"):
            raise ToolError(f"{transaction_id} is a {t.channel} transaction, not a wire")
        job_id = f"JOB-{len(self.os.jobs) + 1}"
        eta = self._rng.randint(self.config.eta_min, self.config.eta_max)
        self.os.jobs[job_id] = Job(transaction_id, self.step_count + eta)
        self._show(transaction_id)
        return {"job_id": job_id, "status": "queued", "eta_steps": eta}, f"Trace queued: {job_id}."

    @tool(kind="os")
    def retrieve_async_result(self, job_id: str) -> tuple[dict, str]:
        """Collect a wire trace; asking before its ETA is a timeout.

        Args:
            job_id: The job id returned by request_wire_trace (JOB-...).
        """
        job = self.os.jobs.get(job_id)
        if job is None:
            raise ToolError(f"unknown job id {job_id!r}")
        if self.step_count < job.ready_step:
            self.os.timeouts += 1
            self.add_reward(self.config.async_timeout_penalty)
            wait = job.ready_step - self.step_count
            return {"job_id": job_id, "status": "pending", "ready_in_steps": wait}, "Timeout."
        if not job.done:
            job.done = True
            self.os.traces_completed += 1
        w = self.world
        t = w.txns[job.txn]
        trace = w.traces.get(t.id)
        if trace is None:
            src = w.parties.get(t.src)
            trace = {
                "reference": "WT-" + t.id.split("-")[1],
                "originator_id": t.src,
                "originator": src.name if src else t.src,
                "originator_country": src.country if src else "Domestic",
                "route": [src.name if src else t.src],
            }
        self._evidence(trace["reference"])
        self._show(t.id, trace["originator_id"])
        return {"job_id": job_id, "status": "done", "transaction_id": t.id, **trace}, "Trace ready."

    @tool(kind="os")
    def search_compliance_manual(self, query: str) -> tuple[dict, str]:
        """Search the compliance manual (typologies, false positives, rule modes, procedure).

        Args:
            query: Words to look for, e.g. 'structuring threshold'.
        """
        hits = manual.search(query)
        return {"results": hits}, f"{len(hits)} sections."

    @tool(kind="os")
    def update_system_prompt(self, rule_mode: RuleMode) -> tuple[dict, str]:
        """Switch the monitoring rule mode; it changes what later tool results show.

        Args:
            rule_mode: standard, enhanced_due_diligence, structuring_watch, trade_scrutiny or
                network_expansion.
        """
        self.os.mode = rule_mode
        self.os.mode_paid = rule_mode == "standard"
        return {"rule_mode": rule_mode}, f"Rule mode {rule_mode} active."
