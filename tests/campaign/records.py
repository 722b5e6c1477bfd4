"""The campaign's history, typed: what the workload sent and was answered (workload.py writes
them, checker.py judges them), and the platform's record of the payments only asking it finds.
Each is appended to the run's history.jsonl as one JSON object (as_json: the fields, `kind`
first), for reading after the run.

`result` is the workload's reading of the answer (workload.classify): `ok` (acknowledged as the
contract says), `failed` (a definite refusal, 4xx), `unknown` (no answer, 5xx) or `odd` (a 2xx
that is not the channel's success answer). A fingerprint is what identifies the event a request
asks for (checker.event_fp): (account, amount, currency) for an order, (transaction id, amount,
currency) for a payment or a refund, () for a close.
"""

import dataclasses
from typing import ClassVar, Optional


@dataclasses.dataclass
class Record:
    kind: ClassVar[str] = ""
    id: int = -1                # Its place in the history (History.add).

    def as_json(self):
        value = {"kind": self.kind}
        value.update(dataclasses.asdict(self))
        return value


@dataclasses.dataclass
class Delivery(Record):
    """One request to a serve (a callback, an order's registration, a hostile request) and its
    answer; one per attempt."""
    kind: ClassVar[str] = "delivery"
    worker: int = 0             # The workload's thread (-2: the late notices' thread).
    out_trade_no: str = ""      # The story's order.
    step: int = 0               # The story's step, and which copy of it.
    op: str = ""
    copy: int = 0
    attempt: int = 0
    serve: int = 0              # Which serve it went to (0 or 1).
    path: str = ""
    channel: str = ""           # The story's channel; "api" for POST /v1/orders.
    status: Optional[int] = None    # None: no answer.
    result: str = ""
    t0: float = 0.0             # When it was sent and answered (time.time()).
    t1: float = 0.0
    outcome: Optional[str] = None   # The ledger's outcome, as the answer says it.
    event_type: Optional[str] = None    # The event it asks for; None: none (hostile).
    fingerprint: Optional[tuple] = None
    asked_out_trade_no: str = ""    # The order the event would be for (an unknown order's).
    settle: bool = False        # Sent again after the faults, to reach a definite answer.
    hostile: Optional[str] = None   # Its kind, for a hostile request.
    query: Optional[str] = None     # The step's query story (late, unnotified ...).
    answer_seq: Optional[int] = None    # The seq a JSON answer names.
    answer: Optional[str] = None    # The answer's first bytes, unless ok.


@dataclasses.dataclass
class PlatformRequest(Record):
    """What the workload asked of the platform's side, and its answer: the fields of
    PlatformNotice and SimulatorPayment (the checker tells them apart by their type)."""
    out_trade_no: str = ""
    op: str = ""
    channel: str = ""
    status: Optional[int] = None
    result: str = ""
    t0: float = 0.0
    event_type: Optional[str] = None
    fingerprint: Optional[tuple] = None
    body: str = ""


@dataclasses.dataclass
class PlatformNotice(PlatformRequest):
    """A payment, refund or close the platform's own ledger took (its daily statement shows
    it), whatever became of the notice."""
    kind: ClassVar[str] = "platform"


@dataclasses.dataclass
class SimulatorPayment(PlatformRequest):
    """A payment the platform simulator took (POST /simulate/pay) and never notifies: only
    asking the platform finds it."""
    kind: ClassVar[str] = "simulator"
    query: Optional[str] = None


@dataclasses.dataclass
class CampaignError(Record):
    """A step the workload could not run: a bug in the campaign, which fails the run."""
    kind: ClassVar[str] = "campaign_error"
    worker: int = 0
    out_trade_no: str = ""
    step: int = 0
    error: str = ""


@dataclasses.dataclass(frozen=True)
class QueriedPayment:
    """A payment the simulator's record holds (World.simulator_record): paid there alone."""
    out_trade_no: str
    fingerprint: tuple          # (transaction id, amount, currency)


_DESCRIBED = ("id", "worker", "out_trade_no", "op", "hostile", "query", "step", "copy", "attempt",
              "serve", "path", "status", "result", "outcome", "event_type", "fingerprint",
              "settle", "answer", "t0")


def describe(record):
    """The record's fields that say what happened, in one line, for a problem's text."""
    return " ".join("%s=%s" % (k, getattr(record, k)) for k in _DESCRIBED
                    if getattr(record, k, None) is not None)
