"""The per-agent controller of SAC and CP-WBFT: the round loop, message buffers and Byzantine behaviours.

The harness is :mod:`.consensus`; roles and reply parsing :mod:`.consensus_rules`.
Import :class:`ConsensusAgent` from :mod:`meshsim.protocols.consensus`.
"""
from __future__ import annotations

from typing import Any, Callable, Generator, Optional

from ..core.sim import Event

from ..core.calls import CallKind, Request, Response, TaskInfo
from ..core.names import node_order
from ..net.messages import HEADER_BYTES
from .consensus_rules import _ATTACK, ADVERSARIAL_ROLES, HONEST_ROLES, ConsensusParams, parse_answer, parse_score
from .llm import LLMClient

__all__ = ["ConsensusAgent"]


class ConsensusAgent:
    """One agent's controller: the round loop, message buffers and Byzantine behaviours.

    Subclasses implement :meth:`_update` (the honest protocol step) and may add
    fields to the broadcast (:meth:`_payload`).
    """

    msg_kind = "consensus"

    def __init__(self, node, params: ConsensusParams, llm: LLMClient, sink: Callable[..., None], role: str):
        self.node = node
        self.name = node.name
        self.env = node.env
        self.params = params
        self.llm = llm
        self.sink = sink  # write-only
        self.role = role
        self.members: frozenset = frozenset()  # colluding group (out-of-band knowledge of colluders)
        self.board: dict = {}  # the colluders' out-of-band channel (shared by the group)
        self.rnd = node.env.pyrandom(self.msg_kind, node.name)
        self.q: Optional[int] = None
        self.t0 = 0.0
        self.closed = -1
        self.buf: dict[tuple[int, int], dict[str, dict]] = {}
        self._wait: Optional[tuple[int, int, set, Event]] = None
        self._proc = None
        # per-query state: the current response and self-score
        self.answer: Optional[str] = None
        self.text = ""
        self.score: Optional[float] = None
        self.resp_tokens = 0
        self.lies: dict[str, Any] = {}
        self.late = 0
        #: the round whose answer the agent is working on (0: initial; t: exchange t-1): the
        #: infrastructure reads it to apply a gray failure from a given round
        self.stage = 0
        node.on(self.msg_kind, self._on_msg)

    # -- lifecycle ------------------------------------------------------------
    def start(self, task: TaskInfo) -> None:
        self.stop()
        # per-query call seeds: the same query gets the same initial draws under
        # every protocol (common random numbers for SAC vs CP-WBFT comparisons)
        self.llm.reseed(self.env.pyrandom("llm", self.name, "query", task.index))
        self._proc = self.node.spawn(self._run(task))

    def stop(self) -> None:
        if self._proc is not None and self._proc.is_alive:
            self._proc.interrupt("query over")
        self._proc = None
        self._wait = None

    # -- messages -------------------------------------------------------------
    def _on_msg(self, msg) -> None:
        p = msg.payload
        q, t = p["q"], p["t"]
        cur = self.q if self.q is not None else 0
        if q < cur or (q == cur and t <= self.closed):
            self.late += 1  # after this agent's deadline for that round: absent
            return
        d = self.buf.setdefault((q, t), {})
        if msg.src not in d:
            d[msg.src] = p
        w = self._wait
        if w is not None and w[0] == q and w[1] == t and w[2] <= d.keys() and not w[3].triggered:
            w[3].succeed()

    def _send_round(self, t: int) -> tuple[list[str], int]:
        peers = sorted(self.node.neighbors, key=node_order)
        lies = self.role in ADVERSARIAL_ROLES
        for i, peer in enumerate(peers):
            ans = self._lie_for(i, t) if lies else (self.answer, self.text)
            payload = self._payload(t, *ans)
            size = HEADER_BYTES + 24 + 4 * max(self.resp_tokens, len(str(payload.get("answer") or "")))
            self.node.send(peer, self.msg_kind, payload, size=size)
        return peers, len(peers)

    def _payload(self, t: int, answer: Optional[str], text: str) -> dict:
        """What one round's message carries: the answer and the text it came in."""
        return {"q": self.q, "t": t, "answer": answer, "text": text}

    def _collect(self, t: int, expected: list[str]) -> Generator[Any, Any, dict[str, dict]]:
        """Round t's answers: wait until every neighbour's has arrived or the round's
        deadline passes (query start + (t+1) x round_deadline: a lock-step schedule
        every agent knows, so one lost message does not push an agent's later rounds
        back); whatever came later is late, i.e. absent."""
        assert self.q is not None  # set by _run before any round
        key = (self.q, t)
        d = self.buf.setdefault(key, {})
        left = self.t0 + (t + 1) * self.params.round_deadline - self.env.now
        if left > 0 and not set(expected) <= d.keys():
            ev = Event(self.env)
            self._wait = (self.q, t, set(expected), ev)
            yield ev | self.env.timeout(left)
            self._wait = None
        self.closed = t
        return self.buf.pop(key, {})

    # -- the query --------------------------------------------------------------
    def _run(self, task: TaskInfo):
        self.q = task.index
        self.t0 = self.env.now  # the query arrived: round t closes at t0 + (t+1) x round_deadline
        self.closed = -1
        self.late = 0
        self.lies = {}
        for k in [k for k in self.buf if k[0] < task.index]:
            del self.buf[k]
        sent = received = 0
        self.stage = 0
        if self.role in HONEST_ROLES:
            yield from self._initial(task)
        else:
            yield from self._prepare_lies(task)
        self._record(0, note=None)
        for t in range(self.params.rounds):
            self.stage = t + 1
            if not self._exchanges(t):
                # the protocol has stopped for this query: the answer stands, nothing is sent
                self._record(t + 1, note="stopped")
                continue
            # a role may change between rounds (set_role): behave as the current one
            if self.role in HONEST_ROLES:
                yield from self._before_send(task, t)
            else:
                yield from self._prepare_lies(task)  # no call when this query's lies are cached
            peers, n = self._send_round(t)
            sent += n
            got = yield from self._collect(t, peers)
            received += len(got)
            if self.role in HONEST_ROLES:
                extra = yield from self._update(task, t, got)
            else:
                self.score = None
                senders = sorted(got, key=node_order)
                extra = {"received": len(got)}
                if self.role == "colluding":
                    extra["scores"] = self.collusion_scores(senders)
                if self.role == "equivocating" and "pool" in self.lies:
                    extra["sent_answers"] = {p: self._lie_for(i, t)[0] for i, p in enumerate(peers)}
            self._record(t + 1, **extra)
        self.sink("traffic", agent=self.name, q=self.q, sent=sent, received=received, late=self.late)
        self.sink("done", agent=self.name, q=self.q)

    def _record(self, t: int, **extra: Any) -> None:
        score = self.score if self.role in HONEST_ROLES else None
        self.sink("round", agent=self.name, q=self.q, t=t, role=self.role, answer=self.answer, score=score,
                  **self._record_extra(), **extra)

    def _record_extra(self) -> dict:
        """Fields the observer records with every round (CP-WBFT: the reported confidence)."""
        return {}

    def _exchanges(self, t: int) -> bool:
        """Whether round t exchanges messages (CP-WBFT as the authors run it stops after one)."""
        return True

    def _before_send(self, task: TaskInfo, t: int):
        """An honest agent's step before it broadcasts in round t."""
        if self.score is None:
            yield from self._rescore(task)  # back from a Byzantine spell: score own answer

    def _set_response(self, resp: Response, answer: str) -> None:
        self.answer = answer
        self.text = resp.text or ""
        self.resp_tokens = resp.completion_tokens

    def _solve(self, kind: str, task: TaskInfo):
        """Ask for a solution (a ``kind`` call) and keep its answer; the reply."""
        resp = yield from self.llm.call(self.llm.request(kind, task, ()))
        ans = parse_answer(resp)
        self.answer = None
        self.text = ""
        self.resp_tokens = resp.completion_tokens
        if ans is not None:
            self._set_response(resp, ans)
        return resp

    def _initial(self, task: TaskInfo):
        yield from self._solve(CallKind.SAC_ANSWER, task)
        yield from self._rescore(task)

    def _score_requests(self, task: TaskInfo, responses: list[dict]) -> list[Request]:
        """phi_i(x, r) calls: the prompt shows the query and the response, nothing
        else (App. B.1) -- not the scorer's own answer, nor whose response it is."""
        return [self.llm.request(CallKind.SAC_SCORE, task, (),
                                 {"response": {"answer": r.get("answer"), "text": r.get("text", "")},
                                  "context_items": 1})
                for r in responses]

    def _rescore(self, task: TaskInfo):
        """s_{i->i} = phi_i(x, r_i): the same prompt with the agent's own response."""
        if self.answer is None:
            self.score = 0.0  # nothing to stand on: every neighbour outranks "no answer"
            return
        (req,) = self._score_requests(task, [{"answer": self.answer, "text": self.text}])
        resp = yield from self.llm.call(req)
        s = parse_score(resp)
        self.score = self.params.parse_default if s is None else s

    def _update(self, task: TaskInfo, t: int, got: dict[str, dict]):  # pragma: no cover - abstract
        raise NotImplementedError
        yield

    # -- Byzantine behaviours (App. B.4 and ours) ------------------------------------
    def _prepare_lies(self, task: TaskInfo):
        role = self.role
        if role in _ATTACK and role not in self.lies:
            resp = yield from self.llm.call(self.llm.request(CallKind.SAC_ANSWER, task, (), {"attack": _ATTACK[role]}))
            self.lies[role] = (parse_answer(resp), resp.text or "", resp.completion_tokens)
        elif role == "equivocating" and "pool" not in self.lies:
            k = self.params.equivocation_answers
            reqs = [self.llm.request(CallKind.SAC_ANSWER, task, (), {"attack": "plausible_wrong", "rank": i})
                    for i in range(k)]
            resps = yield from self.llm.call_many(reqs)
            self.lies["pool"] = [(parse_answer(r), r.text or "", r.completion_tokens) for r in resps]
        elif role == "colluding" and "agreed" not in self.lies:
            # the group's out-of-band channel: the first colluder to get here writes
            # the agreed lie for this query, the others wait for it and copy it
            entry = self.board.get(task.index)
            if entry is None:
                entry = self.board[task.index] = {"ready": Event(self.env)}
                resp = yield from self.llm.call(self.llm.request(CallKind.SAC_ANSWER, task, (),
                                                                 {"attack": "plausible_wrong", "rank": 0}))
                entry["lie"] = (parse_answer(resp), resp.text or "", resp.completion_tokens)
                entry["ready"].succeed()
            elif "lie" not in entry:
                yield entry["ready"]
            self.lies["agreed"] = entry["lie"]
        self.answer, self.text = self._public_lie()

    def _public_lie(self) -> tuple[Optional[str], str]:
        """What the Byzantine agent is recorded as answering (its first lie)."""
        key = "agreed" if self.role == "colluding" else self.role
        if key in self.lies and (self.role in _ATTACK or self.role == "colluding"):
            a, text, tok = self.lies[key]
            self.resp_tokens = tok
            return a, text
        if self.role == "equivocating" and "pool" in self.lies:
            a, text, tok = self.lies["pool"][0]
            self.resp_tokens = tok
            return a, text
        return self.answer, self.text

    def _lie_for(self, i: int, t: int) -> tuple[Optional[str], str]:
        """The answer sent to the i-th neighbour (sorted by name) in round t."""
        if self.role == "equivocating" and "pool" in self.lies:
            pool = self.lies["pool"]
            a, text, _tok = pool[(i + t) % len(pool)]
            return a, text
        return self._public_lie()

    def collusion_scores(self, senders: list[str]) -> dict[str, float]:
        """How a colluder scores: its group 1.0, everyone else 0.0."""
        return {j: 1.0 if j in self.members else 0.0 for j in senders}
