"""Prompt templates, build_messages and the reply parsers (App. D of MeshHeal, App. B of SAC)."""
from __future__ import annotations

import json

import httpx
import pytest

from meshsim.core.calls import CallKind, Request, TaskRef
from meshsim.backends.openai import OpenAIBackend, load_openai_profile
from meshsim.core.errors import InputError
from meshsim.workload.prompts import (PromptSet, build_messages, extract_answer, extract_json, parse_competence, parse_pair,
                             parse_reply, parse_review, parse_sac_score, template_names)

TASK = TaskRef(index=1, id="bbh/object_counting/9", type="object_counting",
               question="I have a cow, two goats and a piano. How many animals do I have?", answer="QUUX-77",
               required=("zz_secret_a", "zz_secret_b"), dataset="bbh")
MC = TaskRef(index=2, id="mc", type="date_understanding", question="Today is 01/01/2020. Tomorrow?",
             answer="B", choices=("01/03/2020", "01/02/2020"), dataset="bbh")
MATH = TaskRef(index=3, id="m", type="algebra", question="Solve 2x = 1.", answer=r"\frac12", dataset="math")


def R(kind, task=TASK, abilities=("arithmetic",), **ctx):
    return Request(kind=kind, agent="A3", model="strong", task=task, abilities=abilities, context=ctx)


ALL_KINDS = [CallKind.INFER, CallKind.CONTRIBUTE, CallKind.FINALIZE, CallKind.REVIEW, CallKind.COMMITTEE,
             CallKind.TAKEOVER_CANDIDATE, CallKind.SYNTHESIS, CallKind.SAC_ANSWER, CallKind.SAC_SCORE,
             CallKind.SAC_REFINE]


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_every_call_kind_has_messages_without_ground_truth(kind):
    msgs = build_messages(R(kind, output_text="cow 1, goats 2", response="3", own="3"))
    assert [m["role"] for m in msgs][-1] == "user"
    assert all(m["content"].strip() for m in msgs)
    text = json.dumps(msgs)
    assert TASK.question in text
    assert "QUUX-77" not in text and "zz_secret" not in text  # answer and true pair never reach a prompt
    assert "$" not in text.replace("\\$", "")  # every placeholder was filled


def test_templates_are_package_data():
    names = set(template_names())
    for n in ("competence_yes", "competence_partial", "competence_no", "infer_abilities", "contribute", "finalize",
              "review_contribute", "review_finalize", "committee_round1", "committee_round2", "takeover_candidate",
              "synthesis", "sac_answer", "sac_score", "sac_refine"):
        assert n in names


def test_competence_directives():
    sys_c = build_messages(R(CallKind.CONTRIBUTE, required=["arithmetic", "instruction_parsing"]))[0]["content"]
    assert "COMPETENCE_MATCH:partial" in sys_c and "arithmetic, instruction_parsing" in sys_c
    sys_y = build_messages(R(CallKind.FINALIZE, abilities=("arithmetic", "instruction_parsing"),
                             required=["arithmetic", "instruction_parsing"]))[0]["content"]
    assert "COMPETENCE_MATCH:yes" in sys_y and "BINDING" in sys_y
    sys_p = build_messages(R(CallKind.FINALIZE, drafts=["cows: 1"]))[0]["content"]
    assert "COMPETENCE_MATCH:partial" in sys_p
    sys_n = build_messages(R(CallKind.FINALIZE, competence="no"))[0]["content"]
    assert "COMPETENCE_MATCH:no" in sys_n and "unreliable" in sys_n


def test_review_prompts_follow_the_json_schemas():
    c = build_messages(R(CallKind.REVIEW, action="contribute", output_text="2 goats, 1 cow"))
    assert "DRAFTER" in c[0]["content"] and '"normal_working_score"' in c[0]["content"]
    assert '"half_correct"' in c[0]["content"] and "over_reach" in c[0]["content"]
    assert "2 goats, 1 cow" in c[1]["content"]
    f = build_messages(R(CallKind.REVIEW, action="finalize", output_text="Answer: 3",
                         drafts=[{"agent": "A1", "abilities": ["instruction_parsing"], "text": "animals: cow, goat x2"}]))
    assert "FINALIZER" in f[0]["content"] and "at most 0.25" in f[0]["content"]
    assert "[A1, abilities instruction_parsing]" in f[1]["content"]
    missing = build_messages(R(CallKind.REVIEW))
    assert "not provided" in missing[1]["content"]


def test_committee_round_two_exchanges_explanations():
    m = build_messages(R(CallKind.COMMITTEE, round=2, label="A", own=0.25, other=0.9, output_text="x",
                         explanations=['{"one_sentence_reason": "miscounted goats"}', "looks right"]))
    u = m[-1]["content"]
    assert "Reviewer A (you): score 0.25. Explanation: miscounted goats" in u
    assert "Reviewer B: score 0.90. Explanation: looks right" in u
    r1 = build_messages(R(CallKind.COMMITTEE, round=1, label="B", output_text="x"))
    assert "Reviewer B" in r1[0]["content"] and "round 2" not in r1[0]["content"]


def test_takeover_and_synthesis():
    t = build_messages(R(CallKind.TAKEOVER_CANDIDATE, action="finalize", output_text="Answer: 4", label="B"))
    assert "Reviewer B" in t[0]["content"] and "Answer: ..." in t[1]["content"]
    s = build_messages(R(CallKind.SYNTHESIS, action="contribute", candidates=["cows 1", "cows 1, goats 2"]))
    assert "Candidate A:" in s[1]["content"] and "Candidate B:" in s[1]["content"]
    assert "do not finalize" in s[1]["content"]


def test_sac_prompts():
    score = build_messages(R(CallKind.SAC_SCORE, task=MATH, response=r"x = \boxed{1/2}"))
    assert "mathematical reasoning problem" in score[1]["content"] and "single number" in score[1]["content"]
    refine = build_messages(R(CallKind.SAC_REFINE, task=MC, own="(A)",
                              neighbors=[("(A) again", 0.4), {"response": "(B) since +1 day", "score": 0.912}]))
    u = refine[1]["content"]
    assert u.index("reliability 0.91") < u.index("reliability 0.40")  # descending, two decimals
    assert "Prefer answers with higher reliability scores, but retain your current answer" in u
    assert "(A) 01/03/2020" in u and "letter of the correct option" in u
    assert "Respond" not in build_messages(R(CallKind.SAC_ANSWER, task=MATH))[1]["content"]
    assert r"\boxed" in build_messages(R(CallKind.SAC_ANSWER, task=MATH))[1]["content"]


def test_sac_prompts_take_the_protocols_context_shapes():
    own = {"answer": "A", "text": "", "score": 0.5}
    retained = [{"answer": "B", "text": "Tomorrow is the 2nd.\nAnswer: B", "score": 0.8},
                {"answer": "A", "text": "", "score": 0.3}]
    u = build_messages(R(CallKind.SAC_REFINE, task=MC, own=own, retained=retained))[1]["content"]
    assert "Your current answer:\n<<<\nAnswer: A\n>>>" in u
    assert u.index("Tomorrow is the 2nd.") < u.index("reliability 0.30")
    s = build_messages(R(CallKind.SAC_SCORE, task=MC, response={"answer": "B", "text": "", "latent": {}}))[1]["content"]
    assert "<<<\nAnswer: B\n>>>" in s
    ood = build_messages(R(CallKind.SAC_ANSWER, task=MC, attack="ood"))
    assert MC.question not in json.dumps(ood)
    wrong = build_messages(R(CallKind.SAC_ANSWER, task=MC, attack="plausible_wrong", rank=1))[1]["content"]
    assert "WRONG" in wrong and "variant 2" in wrong and MC.question in wrong


def test_infer_prompt_lists_vocabulary_and_documented_pairs():
    m = build_messages(R(CallKind.INFER, abilities=(), pairs=[["arithmetic", "instruction_parsing"]]))
    u = m[1]["content"]
    assert "- arithmetic: exact arithmetic" in u and "- navigate: arithmetic, spatial_reasoning" in u
    assert "Task type: object_counting" in u


def test_overrides_inline_and_folder(tmp_path):
    ps = PromptSet(templates={"sac_score": "=== user ===\nRate: $response"})
    assert build_messages(R(CallKind.SAC_SCORE, response="3"), ps) == [{"role": "user", "content": "Rate: 3"}]
    (tmp_path / "agent_system.txt").write_text("Agent $agent here.")
    (tmp_path / "extra.md").write_text("ignored")
    ps2 = PromptSet.from_spec({"dir": str(tmp_path)})
    assert build_messages(R(CallKind.CONTRIBUTE), ps2)[0]["content"].startswith("Agent A3 here.")
    assert ps2.overridden == ["agent_system"]
    (tmp_path / "no_such.txt").write_text("x")
    with pytest.raises(InputError, match="unknown prompt template"):
        PromptSet(dir=tmp_path)
    with pytest.raises(InputError):
        PromptSet(templates={"bogus": "x"})
    with pytest.raises(InputError):
        PromptSet.from_spec({"dir": "x", "other": 1})


def test_profile_prompt_override_reaches_the_request():
    bodies = []

    def h(req):
        bodies.append(json.loads(req.content))
        return httpx.Response(200, json={"choices": [{"message": {"content": "0.7"}}]})

    prof = load_openai_profile(None, {"name": "p", "base_url": "http://x.test/v1", "models": {"strong": {"id": "m"}},
                                      "prompts": {"templates": {"sac_score": "=== user ===\nOnly: $response"}}})
    b = OpenAIBackend(prof, transport=httpx.MockTransport(h))
    try:
        r = b.complete_sync(R(CallKind.SAC_SCORE, response="42"))
    finally:
        b.close()
    assert bodies[0]["messages"] == [{"role": "user", "content": "Only: 42"}] and r.fields["score"] == 0.7
    assert b.describe()["prompts_overridden"] == ["sac_score"]


# ---------------------------------------------------------------------- parsers

@pytest.mark.parametrize("text, expected", [
    ('{"normal_working_score": 0.8}', 0.8),
    ('```json\n{"normal_working_score": 0.25, "failure_evidence": "a {brace} in text"}\n```', 0.25),
    ('Here is my review: {"half_correct": 1, "normal_working_score": 1.0,} Thanks.', 1.0),
    ("{'normal_working_score': 0.5, 'specific_failure_found': False}", 0.5),
    ('{"normal_working_score": .75, "specific_failure_found": True}', 0.75),
    ('{"normal_working_score": 0.6, "confidence": 0.9', 0.6),  # cut off
    ('{normal_working_score: 0.4}', 0.4),  # bare key
    ("{“normal_working_score”: 0.9}", 0.9),  # smart quotes
])
def test_extract_json_tolerates_common_damage(text, expected):
    d = extract_json(text)
    assert d is not None and d["normal_working_score"] == pytest.approx(expected)


def test_extract_json_none():
    assert extract_json("no json here") is None and extract_json("") is None
    assert extract_json('[1, 2]') is None


def test_parse_review_fallbacks_and_clipping():
    assert parse_review('{"normal_working_score": 1.7}')["score"] == 1.0
    assert parse_review('{"normal_working_score": -2}')["score"] == 0.0
    assert parse_review('{"half_correct": 0.25, "specific_failure_found": true, "failure_evidence": "2+2=5"}') \
        == pytest.approx({"score": 0.25, "parsed": True, "half_correct": 0.25, "specific_failure_found": True,
                          "failure_evidence": "2+2=5", "explanation": "", "constraint_violated": False})
    broken = parse_review('"normal_working_score": 0.35 and then garbage {')
    assert broken["score"] == 0.35 and broken["parsed"]
    none = parse_review("It looks fine to me.")
    assert none["score"] == 0.5 and none["parsed"] is False
    v = parse_review('{"normal_working_score": 0.2, "specific_failure_found": false}')
    assert v["constraint_violated"] is True
    assert parse_review('{"normal_working_score": "0.9"}')["score"] == 0.9
    assert parse_review('{"normal_working_score": 0.9, "one_sentence_reason": "ok"}')["explanation"] == "ok"


@pytest.mark.parametrize("text, score", [
    ("0.85", 0.85), ("Score: 0.9 because step 2", 0.9), ("1.5", 1.0), ("85", 1.0), ("", 0.5),
    ("I am not sure", 0.5), ("0", 0.0), (".7", 1.0), ("confidence 0.3\n0.9", 0.3),
])
def test_sac_score_first_number_clipped(text, score):
    # the paper's regex needs a leading digit: ".7" reads as 7, clipped to 1.0
    assert parse_sac_score(text) == score


def test_parse_pair():
    pairs = [("arithmetic", "instruction_parsing"), ("arithmetic", "spatial_reasoning")]
    assert parse_pair('{"abilities": ["instruction_parsing", "arithmetic"]}', pairs) == ["arithmetic",
                                                                                        "instruction_parsing"]
    assert parse_pair("It needs spatial_reasoning and arithmetic.", pairs) == ["arithmetic", "spatial_reasoning"]
    assert parse_pair('{"pair": "Spatial Reasoning, arithmetic"}', pairs) == ["arithmetic", "spatial_reasoning"]
    assert parse_pair("no idea", pairs) is None
    assert parse_pair('{"abilities": ["x", "y"]}', pairs) == ["x", "y"]


def test_parse_competence_and_answers():
    assert parse_competence("COMPETENCE_MATCH: Partial\n...") == "partial"
    assert parse_competence("nothing") is None
    assert extract_answer("COMPETENCE_MATCH:yes\nAnswer: 3", TASK.__class__(**{**_d(TASK), "answer": "3"})) == "3"
    assert extract_answer("I pick (B)", MC) == "B"
    assert extract_answer(r"so $\boxed{\frac{1}{2}}$", MATH) == r"\frac{1}{2}"
    assert extract_answer("COMPETENCE_MATCH:no\nblue ball", None) == "blue ball"


def _d(t):
    return {f: getattr(t, f) for f in t.__slots__}


def test_parse_reply_fields_match_the_fake_backend_names():
    f, ok = parse_reply(R(CallKind.INFER, abilities=()), '{"abilities": ["arithmetic", "instruction_parsing"]}')
    assert f["pair"] == ["arithmetic", "instruction_parsing"] and ok is False  # the true pair here is zz_secret
    f, ok = parse_reply(R(CallKind.CONTRIBUTE), "COMPETENCE_MATCH:partial\ncow=1, goats=2")
    assert f["half_correct"] is None and ok is None
    f, ok = parse_reply(R(CallKind.FINALIZE, task=MC), "Answer: B")
    assert f["final_correct"] is True and f["half_correct"] is True and ok is True
    f, _ = parse_reply(R(CallKind.REVIEW), '{"normal_working_score": 0.75}')
    assert f["score"] == 0.75
    f, _ = parse_reply(R(CallKind.COMMITTEE), '{"normal_working_score": 0.3, "one_sentence_reason": "r"}')
    assert f["score"] == 0.3 and f["explanation"] == "r"
    f, ok = parse_reply(R(CallKind.TAKEOVER_CANDIDATE, task=MC, action="finalize"), "(A)")
    assert f["candidate_correct"] is False and ok is False
    f, ok = parse_reply(R(CallKind.SYNTHESIS, task=MC, action="finalize"), "Answer: (B)")
    assert f["synthesis_correct"] is True and f["final_correct"] is True
    f, ok = parse_reply(R(CallKind.SAC_ANSWER, task=MATH), r"\boxed{0.5}")
    assert f["correct"] is True and f["answer"] == "0.5"
    f, _ = parse_reply(R(CallKind.SAC_SCORE), "0.25")
    assert f == {"score": 0.25, "parsed": True}
    assert parse_reply(R(CallKind.SAC_SCORE), "no number")[0] == {"score": None, "parsed": False}
