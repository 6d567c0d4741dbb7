"""AutoGen with a mandatory manager (Wu et al. 2023, arXiv 2308.08155) on the shared execution layer.

**Centralized by design.** As the MeshHeal paper runs it (Sec. 6: "a
centralized AutoGen implementation with a mandatory manager ... A3 is the
mandatory manager and appears on every task path"), one agent — ``manager``,
A3 by default — coordinates every task, like AutoGen's ``GroupChatManager``:

* the entry agent relays the task to the manager (no LLM call);
* the manager infers the task's ability pair (InferAbilities, App. B.2);
* each turn the manager **selects the next speaker** with one LLM call
  (AutoGen's ``speaker_selection_method="auto"``: the manager's model reads
  the conversation and the participants' descriptions and names one), here a
  ``select`` call listing every participant (the manager included) with its
  declared abilities and the abilities still needed;
* the selected agent speaks: it does the next needed step (Contribute, or
  Finalize for the last one) with the model Model-Backed MAS Evaluation
  gives it for that ability — a wrongly selected agent works outside its
  abilities, with the weak model (Sec. 5: "an incorrect route can change the
  model applied to part of the task");
* when every needed ability is covered the chat ends and the manager returns
  its **summary** of it. AutoGen's default is the last message
  (``ConversableAgent.DEFAULT_SUMMARY_METHOD = "last_msg"`` in
  ``autogen/agentchat/conversable_agent.py``, repository ``microsoft/autogen``
  v0.2; ``initiate_chat(summary_method=...)``): the final speaker's message is
  returned unchanged, no LLM call. ``summary: reflection`` (an option) is
  AutoGen's ``"reflection_with_llm"``: one ``summarize`` call by the manager's
  model over the conversation.

When the manager degrades (the paper degrades A3), every one of its calls —
inference, selections (and the summary with ``reflection``) — runs on the weak
model: its selections degrade for every task.

**Assumed**: the mandatory manager is A3 (MeshHeal Sec. 6); ``max_turns`` 6
(GroupChat ``max_round``; range 2 .. 20: two speakers are needed); an
unparsable selection falls back to a random participant.

No review, no detector, no isolation.

The manager reads only its own state and messages (participants' declared
abilities arrive in ``hello`` messages); it is central because the protocol
puts it on every path, not because it reads global state.
"""
from __future__ import annotations

from typing import Annotated, Any, Generator, Literal, Optional

from pydantic import Field
from ...core.sim import Event

from ...core.calls import CallKind
from ...core.errors import InputError
from ...core.names import node_order
from ...net.messages import HEADER_BYTES
from ..execution import Output, TaskState, generate, infer_pair
from .common import Baseline, BaselineParams, ChainAgent

__all__ = ["AutoGen", "AutoGenParams", "AutoGenAgent"]


class AutoGenParams(BaselineParams):
    manager: str = "A3"  # MeshHeal Sec. 6: "A3 is the mandatory manager"
    summary: Literal["reflection", "last_msg"] = "last_msg"  # AutoGen's DEFAULT_SUMMARY_METHOD
    max_turns: Annotated[int, Field(ge=1, le=1000)] = 6  # GroupChat max_round: speaker turns before the manager gives up

    def check(self, sc: Any, G: Any) -> None:
        super().check(sc, G)
        if self.manager not in G:
            raise InputError("the manager is not an agent", field="protocol.params.manager", value=self.manager)
        missing = [v for v in G.nodes if v != self.manager and not G.has_edge(v, self.manager)]
        if missing:
            raise InputError(f"every agent must be linked to the manager ({missing[0]} is not)",
                             field="protocol.params.manager", value=self.manager)


class AutoGenAgent(ChainAgent):
    # deliberate repetition: each baseline agent declares its method, Params type and state like this (typed, issue 31)
    method = "autogen"

    params: AutoGenParams

    def __init__(self, *a: Any, **kw: Any):
        super().__init__(*a, **kw)
        self._waiting: dict[int, Event] = {}
        self.node.on("request", self._on_request)
        self.node.on("work", self._on_work)
        self.node.on("work_done", self._on_work_done)

    @property
    def is_manager(self) -> bool:
        return self.name == self.params.manager

    # -- entry: hand the task to the manager --------------------------------------------
    def start(self, task) -> None:
        if self.is_manager:
            self.node.spawn(self._manage(TaskState(task=task, visits=[self.name])))
        else:
            self.node.spawn(self._relay(task))

    def _relay(self, task) -> Generator[Any, Any, None]:
        X = TaskState(task=task, visits=[self.name], actions=[(self.name, "relay")])
        ok = yield self.reliable.send(self.params.manager, "request", {"state": X},
                                      size=HEADER_BYTES + X.size_bytes())
        if not ok:
            self.sink("unanswered", task=task, state=X, reason="no_manager")

    def _on_request(self, msg) -> Generator:
        return self._manage(msg.payload["state"])

    # -- the manager ------------------------------------------------------------------------
    def _manage(self, X: TaskState) -> Generator[Any, Any, None]:
        p = self.params
        X.visits.append(self.name)
        X.R = yield from infer_pair(self.llm, X.task, self.pairs)
        X.actions.append((self.name, "infer"))
        y: Optional[Output] = None
        for _turn in range(p.max_turns):
            M = sorted(set(X.R) - X.C)
            if not M:
                break
            names = sorted(set(self.neighbours()) | {self.name}, key=node_order)
            ctx = {"candidates": self.describe(names), "needed": M, "context_items": len(X.Y)}
            r = yield from self.llm.call(self.llm.request(CallKind.SELECT, X.task, (), ctx))
            pick = r.fields.get("agent") if r.error is None else None
            if pick not in names:
                pick = names[self.rnd.randrange(len(names))]  # an unparsable selection: AutoGen picks a fallback
            held = [s for s in M if s in (self.K if pick == self.name else self.peer_abilities.get(pick, ()))]
            s = held[0] if held else M[self.rnd.randrange(len(M))]
            action = "finalize" if len(M) == 1 else "contribute"
            X.actions.append((self.name, f"select->{pick}"))
            if pick == self.name:
                y = yield from generate(self.llm, self.name, self.K, action, (s,), X)
            else:
                y = yield from self._ask(pick, X, s, action)
                if y is None:
                    self.sink("unanswered", task=X.task, state=X, reason="worker_timeout")
                    return
            X.visits.append(pick)
            X.actions.append((pick, action))
            X.Y.append(y)
            X.P.append(pick)
            X.C.add(s)
        if y is None or set(X.R) - X.C:
            self.sink("unanswered", task=X.task, state=X, reason="max_turns")
            return
        if p.summary == "reflection":
            r = yield from self.llm.call(self.llm.request(
                CallKind.SUMMARIZE, X.task, (), {"output_text": y.text, "context_items": len(X.Y),
                                                 "action": "finalize"}))
            y = Output(agent=self.name, abilities=y.abilities, action="finalize",
                       text=(r.text or "") if r.error is None else "")
            X.actions.append((self.name, "summarize"))
        self.sink("done", task=X.task, state=X, output=y)

    def _ask(self, worker: str, X: TaskState, s: str, action: str) -> Generator[Any, Any, Optional[Output]]:
        ev = Event(self.env)
        self._waiting[X.task.index] = ev
        ok = yield self.reliable.send(worker, "work", {"state": X, "ability": s, "action": action},
                                      size=HEADER_BYTES + X.size_bytes())
        if not ok:
            self._waiting.pop(X.task.index, None)
            return None
        got = yield ev | self.env.timeout(self.params.round_timeout)
        self._waiting.pop(X.task.index, None)
        return got[ev] if ev in got else None

    def _on_work_done(self, msg) -> None:
        ev = self._waiting.get(msg.payload["task"])
        if ev is not None and not ev.triggered:
            ev.succeed(msg.payload["output"])

    # -- a participant speaks ------------------------------------------------------------------
    def _on_work(self, msg) -> Generator:
        return self._speak(msg.src, msg.payload["state"], msg.payload["ability"], msg.payload["action"])

    def _speak(self, manager: str, X: TaskState, s: str, action: str) -> Generator[Any, Any, None]:
        y = yield from generate(self.llm, self.name, self.K, action, (s,), X)
        self.reliable.send(manager, "work_done", {"task": X.task.index, "output": y},
                           size=HEADER_BYTES + 400)


class AutoGen(Baseline):
    name = "autogen"
    Params = AutoGenParams
    Agent = AutoGenAgent
    decentralized = False
