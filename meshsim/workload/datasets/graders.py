"""Answer extraction and grading: exact match, numeric, LaTeX (MATH) and multiple choice.

Every grader takes the model's *whole reply* and the gold answer and returns a
bool; a missing or unparsable answer is incorrect (MeshHeal App. B.3). The
extractors are exported because the prompt parsers use them too.

* ``exact``: the final answer (``Answer: ...`` line, else the whole reply)
  after case, whitespace, quote, markdown and trailing-period normalisation.
* ``numeric``: the final number (``\\boxed{}``, ``Answer:`` line, else the last
  number in the reply), with thousands separators, ``$``, ``%``, units and
  simple fractions handled; equal within ``rel_tol`` / ``abs_tol``.
* ``math``: the last ``\\boxed{}`` (else the ``Answer:`` line), normalised
  (``\\dfrac``→``\\frac``, ``\\frac12``, ``\\left``/``\\right``, spacing macros,
  ``^\\circ``, ``\\%``, trailing ``\\text{units}``, ``x =`` prefixes) and compared
  as strings, then numerically (fractions, ``\\sqrt``, ``\\pi``), then element by
  element for tuples and comma lists.
* ``choice``: an option letter (``(B)``, ``Answer: B``, ``B)``, a bare ``B``) or
  the exact text of one option, against a gold letter, index or option text.
"""
from __future__ import annotations

import ast
import math
import operator
import re
from typing import Any, Callable, Optional, Sequence

__all__ = ["GRADERS", "grade_answer", "grader_kind", "extract_boxed", "extract_final", "extract_number",
           "extract_choice", "normalize_text", "normalize_math", "math_equal", "numeric_equal", "parse_number",
           "LETTERS"]

LETTERS = "ABCDEFGHIJKLMNOP"

# ---------------------------------------------------------------- extractors

_ANSWER_LINE = re.compile(
    r"(?:final\s+answer|answer)\s*(?:is|:|=)?\s*(?::|-(?=\s))?\s*(.+)", re.IGNORECASE)


def extract_boxed(text: str) -> Optional[str]:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` (balanced braces), or ``\\boxed 5``."""
    if not text:
        return None
    best = None
    for m in re.finditer(r"\\(?:boxed|fbox)\s*", text):
        i = m.end()
        if i < len(text) and text[i] == "{":
            depth, j = 0, i
            while j < len(text):
                c = text[j]
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                    if depth == 0:
                        best = text[i + 1:j]
                        break
                j += 1
        else:
            m2 = re.match(r"([^\s$]+)", text[i:])
            if m2:
                best = m2.group(1)
    return best.strip() if best is not None else None


def _clean_final(s: str) -> str:
    s = s.strip()
    s = re.sub(r"^\*+|\*+$", "", s).strip()  # markdown bold
    s = s.strip().rstrip(".").strip()
    if len(s) >= 2 and s[0] == s[-1] == "$":
        s = s[1:-1].strip()
    return s


def extract_final(text: str) -> Optional[str]:
    """The last ``Answer: ...`` / ``The answer is ...`` / ``Final answer: ...`` statement."""
    if not text:
        return None
    found = None
    for line in text.splitlines():
        m = None
        for m in _ANSWER_LINE.finditer(line.replace("**", "")):
            pass
        if m is not None and m.group(1).strip():
            found = m.group(1)
    return _clean_final(found) if found is not None else None


_NUM = r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+−]?\.\d+"
_NUM_RE = re.compile(_NUM)


def parse_number(s: Any) -> Optional[float]:
    """A number from a short answer string: ``1,234``, ``$5``, ``12 cm``, ``-3/4``, ``\\frac{1}{2}``, ``25%``."""
    if s is None:
        return None
    if isinstance(s, bool):
        return None
    if isinstance(s, (int, float)):
        return float(s)
    t = str(s).strip()
    t = t.replace("−", "-").replace("\\$", "").replace("$", "").replace("\\!", "").replace("\\,", "")
    t = re.sub(r"\\(?:text|mbox|mathrm)\{[^{}]*\}\s*$", "", t).strip()
    t = t.replace("\\%", "").rstrip("%").strip()
    t = re.sub(r"^[a-zA-Z]\s*=\s*", "", t)
    m = re.fullmatch(r"\\[dt]?frac\{?(-?\d+)\}?\{?(\d+)\}?", t.replace(" ", ""))
    if m:
        den = int(m.group(2))
        return int(m.group(1)) / den if den else None
    m = re.fullmatch(r"(-?\d+)\s*/\s*(\d+)", t)
    if m:
        den = int(m.group(2))
        return int(m.group(1)) / den if den else None
    m = re.fullmatch(rf"({_NUM})\s*([a-zA-Z][a-zA-Z ./^\d]*)?", t)
    if m:
        return _to_float(m.group(1))
    return None


def _to_float(tok: str) -> Optional[float]:
    try:
        return float(tok.replace(",", "").replace("−", "-"))
    except ValueError:
        return None


def extract_number(text: str) -> Optional[float]:
    """The final number of a reply: boxed, else the answer line, else the last number in the text."""
    if not text:
        return None
    for cand in (extract_boxed(text), extract_final(text)):
        if cand:
            v = parse_number(cand)
            if v is None:  # "7 (not 8)" -> 7; "3 + 4 = 7" -> 7
                tail = cand.replace("−", "-").rsplit("=", 1)[-1]
                nums = _NUM_RE.findall(tail)
                if nums:
                    v = _to_float(nums[0])
            if v is not None:
                return v
    nums = _NUM_RE.findall(text.replace("−", "-"))
    return _to_float(nums[-1]) if nums else None


def extract_choice(text: str, choices: Sequence[str] = (), n: Optional[int] = None) -> Optional[str]:
    """The option letter a reply commits to (``A``..), or None."""
    if not text:
        return None
    n = n or (len(choices) if choices else 10)
    letters = LETTERS[:max(1, min(n, len(LETTERS)))]
    L = f"[{letters}]"
    t = text.replace("**", "")
    pats = [
        rf"(?:final\s+answer|answer|option|choice)\s*(?:is|:|=)?\s*(?::|-(?=\s))?\s*\(?({L})\)?(?![A-Za-z])",
        rf"\\boxed\{{\s*\(?({L})\)?\s*\}}",
    ]
    for p in pats:
        ms = list(re.finditer(p, t, re.IGNORECASE))
        if ms:
            return ms[-1].group(1).upper()
    s = t.strip()
    m = re.fullmatch(rf"\(?({L})\)?[.:]?", s)
    if m:
        return m.group(1)
    ms = list(re.finditer(rf"\(({L})\)", t))
    if ms:
        return ms[-1].group(1)
    m = re.match(rf"\s*({L})[).:](?:\s|$)", t)
    if m:
        return m.group(1)
    if choices:  # the text of exactly one option
        fin = normalize_text(extract_final(text) or text)
        hits = [i for i, c in enumerate(choices) if normalize_text(c) == fin]
        if len(hits) == 1:
            return LETTERS[hits[0]]
    return None


# ---------------------------------------------------------------- normalisers

def normalize_text(s: Any) -> str:
    t = str(s if s is not None else "")
    t = t.replace("**", "").replace("`", "")
    t = t.strip().strip("\"'“”‘’").strip()
    t = re.sub(r"\s+", " ", t).lower()
    t = t.rstrip(".").strip()
    return t


def _strip_wrappers(s: str) -> str:
    s = s.strip()
    while True:
        t = s
        if len(t) >= 2 and t[0] == t[-1] == "$":
            t = t[1:-1].strip()
        t = re.sub(r"^\\\[|\\\]$", "", t).strip()
        t = re.sub(r"^\\\(|\\\)$", "", t).strip()
        if t == s:
            return s
        s = t


def _unwrap(s: str, macro: str) -> str:
    """``\\macro{X}`` -> ``X`` with balanced braces."""
    out = []
    i = 0
    key = "\\" + macro + "{"
    while True:
        j = s.find(key, i)
        if j < 0:
            out.append(s[i:])
            return "".join(out)
        out.append(s[i:j])
        k = j + len(key)
        depth = 1
        while k < len(s) and depth:
            if s[k] == "{":
                depth += 1
            elif s[k] == "}":
                depth -= 1
            k += 1
        out.append(s[j + len(key):k - 1])
        i = k


def normalize_math(s: Any) -> str:
    """Canonical string of a LaTeX answer (see module doc)."""
    t = _strip_wrappers(str(s if s is not None else ""))
    t = t.replace("−", "-").replace("\n", " ")
    # trailing units in \text{...} (only when something precedes them)
    t = re.sub(r"(?<=\S)\s*\\(?:text|mbox|mathrm)\{\s*[a-zA-Z][a-zA-Z. ]*\}(\^[23]|\^\{[23]\})?\s*$", "", t)
    for macro in ("text", "textbf", "mbox", "mathrm", "mathbf", "boxed"):
        t = _unwrap(t, macro)
    t = re.sub(r"\\[dt]frac", r"\\frac", t)
    t = t.replace("\\left", "").replace("\\right", "")
    for sp in ("\\!", "\\,", "\\;", "\\:", "\\ ", "~", "\\quad", "\\qquad"):
        t = t.replace(sp, "")
    t = re.sub(r"\^\s*\{?\\circ\}?", "", t).replace("°", "").replace("\\degree", "")
    t = t.replace("\\%", "").replace("%", "").replace("\\$", "").replace("$", "")
    t = t.replace("\\cdot", "*").replace("\\times", "*")
    t = t.strip().rstrip(".").strip()
    # x = 5 / y=\frac12 -> the value (a single short left-hand side)
    t = re.sub(r"^[a-zA-Z](?:_\{?\w+\}?)?\s*=\s*", "", t)
    t = t.replace(" ", "")
    # \frac12 -> \frac{1}{2}; \frac1{2}; \sqrt2 -> \sqrt{2}
    t = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", t)
    t = re.sub(r"\\frac\{([^{}]*)\}(\d)", r"\\frac{\1}{\2}", t)
    t = re.sub(r"\\frac(\d)\{", r"\\frac{\1}{", t)
    t = re.sub(r"\\sqrt(\d+)", r"\\sqrt{\1}", t)
    # thousands separators (only a well-formed 1,234,567)
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", t):
        t = t.replace(",", "")
    t = re.sub(r"(?<![\d.])\.(\d)", r"0.\1", t)  # .5 -> 0.5
    if re.fullmatch(r"-?\d+\.\d*?0+", t):  # 2.50 -> 2.5, 3.0 -> 3
        t = t.rstrip("0").rstrip(".")
    return t


# ---------------------------------------------------------------- safe numeric evaluation

_OPS: dict[type[ast.AST], Callable[..., float]] = {
        ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos}


def _latex_to_expr(t: str) -> Optional[str]:
    s = t
    for _ in range(8):  # nested \frac / \sqrt
        s2 = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"((\1)/(\2))", s)
        s2 = re.sub(r"\\sqrt\[(\d+)\]\{([^{}]*)\}", r"((\2)**(1/\1))", s2)
        s2 = re.sub(r"\\sqrt\{([^{}]*)\}", r"((\1)**0.5)", s2)
        if s2 == s:
            break
        s = s2
    s = s.replace("\\pi", "(pi)").replace("^", "**").replace("{", "(").replace("}", ")")
    s = re.sub(r"(\d)\s*\(", r"\1*(", s)  # 2(pi) -> 2*(pi)
    s = re.sub(r"\)\s*(\d|\()", r")*\1", s)
    if re.search(r"[^0-9+\-*/().pie ]", s) or re.search(r"[a-z]", s.replace("pi", "")):
        return None
    return s


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.Name) and node.id == "pi":
        return math.pi
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and (abs(b) > 64 or abs(a) > 1e6):
            raise ValueError("exponent too large")
        return _OPS[type(node.op)](a, b)
    raise ValueError("unsupported expression")


def _value(t: str) -> Optional[float]:
    v = parse_number(t)
    if v is not None:
        return v
    expr = _latex_to_expr(t)
    if expr is None or len(expr) > 200:
        return None
    try:
        x = _eval(ast.parse(expr, mode="eval"))
    except (ValueError, SyntaxError, ZeroDivisionError, OverflowError, TypeError, RecursionError):
        return None
    if isinstance(x, complex) or math.isnan(x):
        return None
    return float(x)


def numeric_equal(a: Optional[float], b: Optional[float], rel_tol: float = 1e-6, abs_tol: float = 1e-9) -> bool:
    if a is None or b is None:
        return False
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)


def _split_top(t: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for c in t:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return parts


def math_equal(pred: Any, gold: Any, rel_tol: float = 1e-6) -> bool:
    """Are two LaTeX answers the same after normalisation (string, numeric, elementwise)?"""
    if pred is None or gold is None:
        return False
    a, b = normalize_math(pred), normalize_math(gold)
    if not a:
        return False
    if a == b:
        return True
    va, vb = _value(a), _value(b)
    if va is not None and vb is not None:
        return numeric_equal(va, vb, rel_tol=rel_tol)
    # tuples / intervals: same brackets, element-wise
    ma = re.fullmatch(r"([(\[])(.*)([)\]])", a)
    mb = re.fullmatch(r"([(\[])(.*)([)\]])", b)
    if ma and mb:
        if (ma.group(1), ma.group(3)) != (mb.group(1), mb.group(3)):
            return False
        pa, pb = _split_top(ma.group(2)), _split_top(mb.group(2))
        return len(pa) == len(pb) > 1 and all(math_equal(x, y, rel_tol) for x, y in zip(pa, pb))
    # unordered lists of solutions: "1,2" vs "2,1"
    pa, pb = _split_top(a), _split_top(b)
    if len(pa) == len(pb) > 1:
        rest = list(pb)
        for x in pa:
            hit = next((k for k, y in enumerate(rest) if math_equal(x, y, rel_tol)), None)
            if hit is None:
                return False
            rest.pop(hit)
        return True
    return False


# ---------------------------------------------------------------- graders

def _gold_letter(gold: Any, choices: Sequence[str]) -> Optional[str]:
    if isinstance(gold, bool):
        return None
    if isinstance(gold, int):
        return LETTERS[gold] if 0 <= gold < len(LETTERS) else None
    g = str(gold).strip()
    m = re.fullmatch(r"\(?([A-Pa-p])\)?", g)
    if m and (not choices or len(g) <= 3):
        return m.group(1).upper()
    for i, c in enumerate(choices):
        if normalize_text(c) == normalize_text(g):
            return LETTERS[i]
    return None


def grade_exact(text: str, gold: Any, aliases: Sequence[str] = (), **_: Any) -> bool:
    golds = [normalize_text(g) for g in [gold, *aliases] if g is not None]
    cands = [extract_final(text), extract_boxed(text), text]
    for c in cands:
        if c is not None and normalize_text(c) in golds:
            return True
    return False


def grade_numeric(text: str, gold: Any, rel_tol: float = 1e-6, abs_tol: float = 1e-9, **_: Any) -> bool:
    g = parse_number(gold)
    if g is None:
        g = _value(normalize_math(gold))
    return numeric_equal(extract_number(text), g, rel_tol, abs_tol)


def grade_math(text: str, gold: Any, rel_tol: float = 1e-6, **_: Any) -> bool:
    gold_s = extract_boxed(str(gold)) or str(gold)
    pred = extract_boxed(text)
    if pred is None:
        pred = extract_final(text)
    if pred is None:
        stripped = text.strip()
        pred = stripped if len(stripped) <= 40 and "\n" not in stripped else None
    return math_equal(pred, gold_s, rel_tol)


def grade_choice(text: str, gold: Any, choices: Sequence[str] = (), **_: Any) -> bool:
    g = _gold_letter(gold, choices)
    return g is not None and extract_choice(text, choices) == g


GRADERS: dict[str, Callable[..., bool]] = {"exact": grade_exact, "numeric": grade_numeric, "math": grade_math,
                                           "choice": grade_choice}


def grader_kind(answer: Any = None, choices: Sequence[str] = (), dataset: str = "", task_type: str = "",
                declared: Optional[str] = None) -> str:
    """Which grader applies: a declared one, choice when options exist, math for MATH-like data,
    numeric for a numeric gold answer, else exact."""
    if declared:
        return declared
    if choices:
        return "choice"
    d = (dataset or "").lower()
    if d in ("math", "math500", "math-500", "hendrycks_math", "competition_math"):
        return "math"
    if isinstance(answer, bool):
        return "exact"
    if isinstance(answer, (int, float)) or (isinstance(answer, str) and re.fullmatch(rf"\s*(?:{_NUM})\s*", answer)):
        return "numeric"
    return "exact"


def grade_answer(kind: str, text: str, gold: Any, **kw: Any) -> bool:
    """Grade reply ``text`` against ``gold`` with grader ``kind`` (exact, numeric, math, choice)."""
    fn = GRADERS.get(kind)
    if fn is None:
        raise ValueError(f"unknown grader {kind!r}; choose one of {sorted(GRADERS)}")
    if text is None:
        return False
    try:
        return bool(fn(str(text), gold, **kw))
    except RecursionError:  # pragma: no cover - pathological input
        return False
