"""The delivery runner: durable first, then the adapter; every receipt journaled.

`submit` appends the envelope to the session inbox (deduplicated by delivery id, so a
second submission of the same id is a no-op that returns the first receipt), journals
`created`, and then `process` walks the session's pending deliveries in inbox order:
- modes `immediate` and `on-idle` are attempted now (adapters without an idle signal
  treat on-idle as immediate); `manual`, `next-message` and `next-tool-call` wait for an
  explicit flush (`actors flush`, or the harness hook of that boundary);
- a retryable failure is retried with capped exponential backoff and jitter, a
  `deferred` receipt at its `available_at`; while one waits, later deliveries of the same
  session wait behind it, so per-session order holds across retries;
- a final failure falls back along the session's `fallback` chain, if any.
Only one process works a session at a time (a blocking flock held for one pass over the
inbox, never while waiting for a retry), so the runner, the reconciler and `actors watch`
can race without ever calling an adapter twice for the same attempt. Listeners registered with `on_event` see created / accepted / delivered /
deferred / failed events.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

from runtime.core import config
from runtime.core.faults import pause_point
from runtime.core.ids import now_iso, parse_iso
from runtime.delivery.contract import DeliveryContext, Receipt
from runtime.delivery.registry import make_adapter
from runtime.delivery.render import write_body
from runtime.delivery.sessions import SessionInbox, load_session
from runtime.store import safe
from runtime.store.appends import append_jsonl, locked
from runtime.store.layout import SessionPaths, StateRoot, session_paths
from runtime.store.reads import read_jsonl
from runtime.store.writes import ensure_dir

if TYPE_CHECKING:
    from runtime.delivery.records import DeliveryRecord
    from runtime.messaging.envelope import Envelope

HELD_MODES = ("manual", "next-message", "next-tool-call")
FINAL = ("delivered", "accepted", "failed-final", "moved")
"""`accepted` is final too: the harness took responsibility; retrying could duplicate it.
`moved`: handed on to the session's successor (runtime.delivery.succession), whose own
journal carries it from there."""
BACKOFF_CAP_S = 300.0
MAX_ATTEMPTS = 12


Listener = Callable[["DeliveryRecord"], None]
_listeners: list[Listener] = []


def on_event(listener: Listener) -> Callable[[], None]:
    """Subscribe to delivery events in this process; returns the unsubscribe function."""
    _listeners.append(listener)
    return lambda: _listeners.remove(listener)


def backoff_s(attempt: int) -> float:
    """Capped exponential backoff with jitter (50-100 % of the step)."""
    base = config.seconds(config.RETRY_BASE)
    step = min(BACKOFF_CAP_S, base * float(2 ** max(0, attempt - 1)))
    return step * random.uniform(0.5, 1.0)


class DeliveryRunner:
    def __init__(self, root: StateRoot) -> None:
        self.root = root
        self.next_wait: float | None = None
        """After `process`: seconds until its session's next retry is due (None: none)."""

    # -- journal -------------------------------------------------------------------
    def _journal(self, paths: SessionPaths, record: DeliveryRecord) -> None:
        record = {"ts": now_iso(), **record}
        append_jsonl(paths.deliveries, record, fsync=True)
        for listener in list(_listeners):
            with contextlib.suppress(Exception):
                listener(record)

    def states(self, owner: str) -> dict[str, dict[str, Any]]:
        """Current state of every delivery of a session (fold of deliveries.jsonl): each a
        `DeliveryRecord`, typed as a plain dict while the harness hooks (actors/cli/hooks.py)
        pass it to their dict-typed pickers."""
        state: dict[str, dict[str, Any]] = {}
        for record in read_jsonl(session_paths(self.root, owner).deliveries).records:
            ident = record.get("id")
            if not isinstance(ident, str):
                continue
            first = state.get(ident, {})
            # each attempt's record replaces the last one (no stale reason lingers),
            # keeping what `created` said about the delivery
            state[ident] = {"mode": first.get("mode"), "type": first.get("type"), **record}
        return state

    # -- entry points ----------------------------------------------------------------
    def submit(
        self,
        owner: str,
        envelope: Envelope,
        *,
        delivery_id: str,
        mode: str = "immediate",
        budget_s: float = 0.0,
        exact_mode: bool = False,
    ) -> DeliveryRecord:
        """Durably enqueue for the session, then try to deliver (within `budget_s`).

        A session registered with `-o mode=<mode>` delivers everything in that mode
        (e.g. `manual`: held until `actors flush`), unless `exact_mode` (the doctor's probe).
        A session that goes on under another id (runtime.delivery.succession) hands the
        follow-up to its live successor, except in `exact_mode`.
        """
        if not exact_mode:
            from runtime.delivery.succession import live_session

            owner = live_session(self.root, owner)
            mode = (load_session(self.root, owner).get("options") or {}).get("mode") or mode
        paths = session_paths(self.root, owner)
        if SessionInbox(paths).append(delivery_id, envelope, mode):
            pause_point("delivery.submit.after_inbox")
            self.journal_created(owner, delivery_id, envelope, mode)
            if not exact_mode:
                from runtime.delivery.succession import settle

                # a succession written while we appended: the entry goes on with the rest
                owner = settle(self.root, owner, delivery_id, self)
        self.process(owner, budget_s=budget_s)
        return cast(
            "DeliveryRecord",
            self.states(owner).get(delivery_id, {"id": delivery_id, "state": "queued"}),
        )

    def journal_created(self, owner: str, delivery_id: str, envelope: Envelope, mode: str) -> None:
        """The journal's first line for a follow-up just appended to the session's inbox."""
        self._journal(
            session_paths(self.root, owner),
            {
                "id": delivery_id,
                "event": "created",
                "state": "queued",
                "mode": mode,
                "type": envelope.get("type"),
            },
        )

    def journal_moved(self, owner: str, delivery_id: str, to: str) -> None:
        """Ends a follow-up here: it went on to session `to` (runtime.delivery.succession)."""
        self._journal(
            session_paths(self.root, owner),
            {"id": delivery_id, "event": "moved", "state": "moved", "to": to},
        )

    def process(
        self, owner: str, *, flush: bool = False, only: str | None = None, budget_s: float = 0.0
    ) -> list[Receipt]:
        """Attempt pending deliveries in order; wait up to `budget_s` for due retries."""
        paths = session_paths(self.root, owner)
        deadline = time.monotonic() + budget_s
        receipts: list[Receipt] = []
        while True:
            with self._session_lock(paths):
                wait = self._pass(owner, paths, flush=flush, only=only, receipts=receipts)
            self.next_wait = wait
            if wait is None or time.monotonic() + wait > deadline:
                return receipts
            time.sleep(max(0.0, wait))

    @contextlib.contextmanager
    def _session_lock(self, paths: SessionPaths) -> Iterator[None]:
        ensure_dir(paths.dir)
        # Blocking: a pass holds the lock only while it walks the inbox (waits for due
        # retries happen outside it), and waiting guarantees that an entry appended while
        # another process was mid-pass is seen by our own pass right after.
        with locked(paths.deliver_lock):
            yield

    def _pass(
        self,
        owner: str,
        paths: SessionPaths,
        *,
        flush: bool,
        only: str | None,
        receipts: list[Receipt],
    ) -> float | None:
        """One walk over the inbox; returns seconds until the next due retry, or None."""
        session = load_session(self.root, owner)
        states = self.states(owner)
        now = time.time()
        for entry in SessionInbox(paths).entries():
            ident = entry["id"]
            state = states.get(ident, {})
            if state.get("state") in FINAL or (only is not None and ident != only):
                continue
            if entry.get("state") == "moved":
                continue  # went on to the successor, whose journal takes it from there
            if entry.get("mode") in HELD_MODES and not flush:
                continue
            due = state.get("next_attempt_at")
            if due and not flush:
                wait = parse_iso(due) - now
                if wait > 0:
                    return wait  # everything after it waits too: per-session order
            receipt = self._attempt(session, paths, entry, int(state.get("attempts", 0)) + 1)
            receipts.append(receipt)
            if receipt.status in ("delivered", "accepted"):
                continue
            if receipt.status == "failed" and not receipt.retryable:
                continue  # final: later deliveries need not wait for it
            if flush:
                return None  # one forced attempt each; the schedule takes over again
            return self._wait_for(owner, ident)  # retrying or deferred: the rest waits behind
        return None

    def _wait_for(self, owner: str, ident: str) -> float | None:
        """Seconds until this delivery's next attempt; None when it will not be retried."""
        due = self.states(owner).get(ident, {}).get("next_attempt_at")
        return max(0.0, parse_iso(due) - time.time()) if due else None

    def _attempt(
        self, session: dict[str, Any], paths: SessionPaths, entry: dict[str, Any], attempt: int
    ) -> Receipt:
        envelope, ident = entry["envelope"], entry["id"]
        chain = [
            session.get("harness", "file"),
            *_split(session.get("options", {}).get("fallback")),
        ]
        receipt = Receipt("failed", ident, reason="no adapter tried")
        body = write_body(paths, ident, envelope)  # once per attempt, for any adapter in the chain
        for harness in chain:
            context = DeliveryContext(
                delivery_id=ident,
                mode=entry.get("mode", "immediate"),
                session=session,
                attempt=attempt,
                body_file=str(body),
                on_injected=lambda: SessionInbox(paths).mark_read([ident]),
            )
            try:
                adapter = make_adapter(session, harness)
                receipt = adapter.receive_message(envelope, context)
                if not isinstance(receipt, Receipt):  # a third-party adapter's bug
                    raise TypeError(f"receive_message returned {type(receipt).__name__}")
            except Exception as exc:  # an adapter bug must not lose the delivery
                receipt = Receipt(
                    "failed",
                    ident,
                    retryable=True,
                    reason=f"{harness} adapter error: {type(exc).__name__}: {exc}",
                )
            if receipt.status != "failed" or receipt.retryable:
                break
        record: dict[str, Any] = {  # the receipt's fields are a plain dict (contract)
            "id": ident,
            "event": receipt.status,
            "attempts": attempt,
            "harness": harness,
            **receipt.to_dict(),
        }
        record.pop("delivery_id", None)
        if receipt.status in ("delivered", "accepted"):
            record["state"] = "delivered" if receipt.status == "delivered" else "accepted"
            record["next_attempt_at"] = None
            if receipt.metadata.get("body_injected"):
                # the model has the body already: not unread for `actors inbox read`
                # (and no FileChanged doorbell rings for it)
                SessionInbox(paths).mark_read([ident])
        elif receipt.status == "deferred" and attempt < MAX_ATTEMPTS:
            record["state"] = "deferred"
            record["next_attempt_at"] = receipt.available_at or now_iso(backoff_s(attempt))
        elif receipt.retryable and attempt < MAX_ATTEMPTS:
            record["state"] = "retrying"
            record["next_attempt_at"] = now_iso(backoff_s(attempt))
        else:
            record["state"] = "failed-final"
            record["next_attempt_at"] = None
        pause_point("delivery.attempt.before_receipt")
        self._journal(paths, cast("DeliveryRecord", record))
        return receipt

    def record_surfaced(
        self,
        owner: str,
        ids: list[str],
        *,
        harness: str,
        boundary: str,
        pending_only: bool = True,
    ) -> list[str]:
        """Journal deliveries the agent was shown some other way (a boundary hook's
        context, `actors inbox read`) as delivered, so no later flush or retry sends them
        again. With `pending_only` ids already final are left alone; a hook that put the
        body into the model's context records that too. Returns the ids journaled."""
        from runtime.delivery.contract import Receipt

        paths = session_paths(self.root, owner)
        states = self.states(owner)
        done = []
        for ident in ids:
            state = states.get(ident, {})
            if pending_only and state.get("state") in FINAL:
                continue
            receipt = Receipt(
                "delivered",
                ident,
                observed=["queued", "injected"],
                metadata={"boundary": boundary, "body_injected": True},
            )
            record: dict[str, Any] = {
                "id": ident,
                "event": "delivered",
                "attempts": int(state.get("attempts", 0)) + 1,
                "harness": harness,
                **receipt.to_dict(),
                "state": "delivered",
                "next_attempt_at": None,
            }
            record.pop("delivery_id", None)
            self._journal(paths, cast("DeliveryRecord", record))
            done.append(ident)
        return done

    def close(self, owner: str, delivery_id: str, why: str) -> None:
        """End a delivery without further attempts (journaled as failed-final)."""
        if self.states(owner).get(delivery_id, {}).get("state") not in FINAL:
            self._journal(
                session_paths(self.root, owner),
                {"id": delivery_id, "event": "closed", "state": "failed-final", "reason": why},
            )

    def flush(self, owner: str, delivery_id: str | None = None) -> list[Receipt]:
        """Deliver held (manual / boundary) and waiting deliveries now."""
        return self.process(owner, flush=True, only=delivery_id)

    def pending(self, owner: str) -> list[dict[str, Any]]:
        states = self.states(owner)
        return [
            e
            for e in SessionInbox(session_paths(self.root, owner)).entries()
            if states.get(e["id"], {}).get("state") not in FINAL
        ]


def read_inbox(
    root: StateRoot,
    owner: str,
    *,
    peek: bool,
    boundary: str,
    show: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every unread follow-up of the session at once. Unless `peek`, they are taken in
    one locked step (two readers never get the same one), handed to `show` (which
    writes them out), and only once it returned are they marked read and journaled
    delivered where the journal had not finished them, so no later flush or retry shows
    them again. When `show` raises (stdout is full, the pipe is gone) they are given
    back unread and the error goes on. Without `show` they are marked read at once
    (a caller that has shown them already; `settle_inbox` is for one that shows them later)."""
    if peek:
        _forward(root, owner)
        return SessionInbox(session_paths(root, owner)).unread()
    inbox = SessionInbox(session_paths(root, owner))
    taken = take_inbox(root, owner)
    if show is not None:
        try:
            show(taken)
        except BaseException:
            with contextlib.suppress(Exception):  # else they are unread once we exit
                inbox.give_back([e["id"] for e in taken])
            raise
    settle_inbox(root, owner, taken, boundary=boundary, shown=True)
    return taken


def take_inbox(root: StateRoot, owner: str) -> list[dict[str, Any]]:
    """Take every unread follow-up of the session (runtime.delivery.sessions, `take`),
    its predecessors' forwarded first; `settle_inbox` finishes them."""
    _forward(root, owner)
    return SessionInbox(session_paths(root, owner)).take()


def _forward(root: StateRoot, owner: str) -> None:
    """A session that went on under another id: its unread follow-ups come here first."""
    from runtime.delivery.succession import forward

    forward(root, owner, DeliveryRunner(root))


def settle_inbox(
    root: StateRoot, owner: str, taken: list[dict[str, Any]], *, boundary: str, shown: bool
) -> None:
    """Entries taken by `SessionInbox.take`: marked read and journaled delivered when
    they were `shown`, else given back unread."""
    inbox = SessionInbox(session_paths(root, owner))
    ids = [e["id"] for e in taken]
    if not shown:
        inbox.give_back(ids)
        return
    inbox.mark_read(ids)
    if ids:
        DeliveryRunner(root).record_surfaced(owner, ids, harness="inbox", boundary=boundary)


def _split(value: Any) -> list[str]:
    return [v.strip() for v in str(value or "").split(",") if v.strip()]


def submit(
    root: StateRoot,
    owner: str,
    envelope: Envelope,
    *,
    delivery_id: str,
    mode: str = "immediate",
    budget_s: float = 0.0,
) -> DeliveryRecord:
    """Deliver one follow-up (what `runtime.delivery.followups.deliver` calls)."""
    return DeliveryRunner(root).submit(
        owner, envelope, delivery_id=delivery_id, mode=mode, budget_s=budget_s
    )


def process_all(root: StateRoot) -> int:
    """Retry whatever is due in every session (used by reconcile and watch)."""
    return retry_due(root)[0]


def retry_due(root: StateRoot) -> tuple[int, float | None]:
    """Retry whatever is due in every session; (attempts made, seconds until the next
    retry falls due or None), so a watcher sleeps exactly until then, on no timer of its
    own."""
    count, waits = 0, []
    for owner in safe.subdirs(root.sessions):
        runner = DeliveryRunner(root)
        count += len(runner.process(owner))
        if runner.next_wait is not None:
            waits.append(runner.next_wait)
    return count, (min(waits) if waits else None)
