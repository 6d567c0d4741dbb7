"""Programmatically generated BBH-style items with known answers (our own sample set).

Each generator builds a question from a seeded ``random.Random`` and computes
its answer, so the set is reproducible and every answer is right by
construction. Task types follow the ``bbh`` dataset profile
(``meshsim/data/datasets/bbh.yaml``) plus ``boolean_expressions``.

``python scenarios/data/generate.py`` rewrites ``scenarios/data/bbh-sample.jsonl``.
"""
from __future__ import annotations

import datetime as dt
import itertools
import random
from typing import Callable

from . import Item
from .graders import LETTERS

__all__ = ["GENERATORS", "generate"]

# ---------------------------------------------------------------- object counting

_CATEGORIES = {
    "musical instruments": ["piano", "flute", "trumpet", "violin", "drum", "clarinet", "accordion", "trombone"],
    "fruits": ["apple", "banana", "peach", "plum", "grape", "strawberry", "orange", "nectarine"],
    "animals": ["cow", "goat", "rabbit", "snake", "duck", "pig", "cat", "donkey"],
    "vegetables": ["carrot", "onion", "potato", "cabbage", "yam", "lettuce head", "garlic", "celery stalk"],
}
_NUMBER_WORDS = ["", "a", "two", "three", "four", "five"]


def _plural(noun: str) -> str:
    if noun.endswith(("sh", "ch", "s", "x")) or noun == "potato":
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def _object_counting(rnd: random.Random, k: int) -> Item:
    cats = list(_CATEGORIES)
    target = rnd.choice(cats)
    others = [c for c in cats if c != target]
    picks: list[tuple[str, int, bool]] = []
    for noun in rnd.sample(_CATEGORIES[target], rnd.randint(2, 4)):
        picks.append((noun, rnd.randint(1, 5), True))
    for noun in rnd.sample(_CATEGORIES[rnd.choice(others)], rnd.randint(1, 3)):
        picks.append((noun, rnd.randint(1, 3), False))
    rnd.shuffle(picks)
    parts = []
    for noun, n, _ in picks:
        article = "an" if n == 1 and noun[0] in "aeiou" else _NUMBER_WORDS[n]
        parts.append(f"{article} {noun if n == 1 else _plural(noun)}")
    listing = ", ".join(parts[:-1]) + f", and {parts[-1]}"
    total = sum(n for _, n, hit in picks if hit)
    q = f"I have {listing}. How many {target} do I have?"
    return Item(id=f"object_counting-{k}", question=q, answer=str(total), type="object_counting", dataset="bbh",
                grader="numeric")


# ---------------------------------------------------------------- multistep arithmetic

def _term(rnd: random.Random) -> tuple[str, int]:
    nums = [rnd.randint(-9, 9) for _ in range(4)]
    ops = [rnd.choice("+-*") for _ in range(3)]
    text = " ".join(f"{n}" + (f" {o}" if i < 3 else "") for i, (n, o) in enumerate(itertools.zip_longest(nums, ops)))
    value = _eval_ints(nums, ops)
    return f"({text})", value


def _eval_ints(nums: list[int], ops: list[str]) -> int:
    # standard precedence: * before + and -
    vals, pend = [nums[0]], []
    for n, o in zip(nums[1:], ops):
        if o == "*":
            vals[-1] = vals[-1] * n
        else:
            pend.append(o)
            vals.append(n)
    out = vals[0]
    for o, v in zip(pend, vals[1:]):
        out = out + v if o == "+" else out - v
    return out


def _multistep_arithmetic(rnd: random.Random, k: int) -> Item:
    (a, va), (b, vb) = _term(rnd), _term(rnd)
    op = rnd.choice("+-*")
    value = va + vb if op == "+" else va - vb if op == "-" else va * vb
    return Item(id=f"multistep_arithmetic_two-{k}", question=f"{a} {op} {b} =", answer=str(value),
                type="multistep_arithmetic_two", dataset="bbh", grader="numeric")


# ---------------------------------------------------------------- navigate

def _navigate(rnd: random.Random, k: int) -> Item:
    moves = {"forward": (0, 1), "backward": (0, -1), "left": (-1, 0), "right": (1, 0)}
    steps = []
    x = y = 0
    for _ in range(rnd.randint(3, 6)):
        d = rnd.choice(list(moves))
        n = rnd.randint(1, 9)
        steps.append((d, n))
        x += moves[d][0] * n
        y += moves[d][1] * n
    if rnd.random() < 0.5 and (x, y) != (0, 0):  # close the loop half of the time
        if x:
            steps.append(("left" if x > 0 else "right", abs(x)))
        if y:
            steps.append(("backward" if y > 0 else "forward", abs(y)))
        x = y = 0
    text = " ".join(f"Take {n} step{'s' if n > 1 else ''} {d}." for d, n in steps)
    q = ("If you follow these instructions, do you return to the starting point? Always face forward. "
         f"{text}\nOptions:\n- Yes\n- No")
    return Item(id=f"navigate-{k}", question=q, answer="Yes" if (x, y) == (0, 0) else "No", type="navigate",
                dataset="bbh", grader="exact")


# ---------------------------------------------------------------- geometric shapes

_SHAPES = {2: "line", 3: "triangle", 5: "pentagon", 6: "hexagon", 7: "heptagon", 8: "octagon"}
_SHAPE_CHOICES = ["circle", "heptagon", "hexagon", "kite", "line", "octagon", "pentagon", "rectangle", "sector",
                  "triangle"]


def _geometric_shapes(rnd: random.Random, k: int) -> Item:
    import math

    n = rnd.choice(list(_SHAPES))
    cx, cy, r = rnd.uniform(20, 80), rnd.uniform(20, 80), rnd.uniform(10, 30)
    start = rnd.uniform(0, 2 * math.pi)
    pts = [(cx + r * math.cos(start + 2 * math.pi * i / n), cy + r * math.sin(start + 2 * math.pi * i / n))
           for i in range(n)]
    if n == 2:
        path = f"M {pts[0][0]:.2f},{pts[0][1]:.2f} L {pts[1][0]:.2f},{pts[1][1]:.2f}"
    else:
        path = f"M {pts[0][0]:.2f},{pts[0][1]:.2f} " + " ".join(f"L {x:.2f},{y:.2f}" for x, y in pts[1:]) + \
            f" L {pts[0][0]:.2f},{pts[0][1]:.2f}"
    q = f'This SVG path element <path d="{path}"/> draws a'
    answer = LETTERS[_SHAPE_CHOICES.index(_SHAPES[n])]
    return Item(id=f"geometric_shapes-{k}", question=q, answer=answer, type="geometric_shapes",
                choices=tuple(_SHAPE_CHOICES), dataset="bbh", grader="choice")


# ---------------------------------------------------------------- logical deduction

_LD_SETTINGS = [
    ("On a shelf, there are three books: {items}. ", "book", ["red", "green", "blue", "white", "black", "orange"],
     "the leftmost", "the rightmost", "to the left of", "to the right of", "second from the left"),
    ("In a golf tournament, there were three golfers: {items}. ", "golfer", ["Ana", "Eli", "Joe", "Mel", "Rob", "Amy"],
     "first", "last", "finished above", "finished below", "second"),
]


def _logical_deduction(rnd: random.Random, k: int) -> Item:
    intro, noun, names, first, last, before, after, middle = rnd.choice(_LD_SETTINGS)
    objs = rnd.sample(names, 3)
    order = objs[:]
    rnd.shuffle(order)  # order[0] is leftmost / first
    is_book = noun == "book"

    def name(o: str) -> str:
        return f"The {o} book" if is_book else o

    def stmt_pos(o: str, pos: int) -> str:
        return f"{name(o)} is {first if pos == 0 else last if pos == 2 else middle}" if is_book else \
            f"{o} finished {first if pos == 0 else last if pos == 2 else middle}"

    def stmt_rel(a: str, b: str) -> str:
        return f"{name(a)} is {before} {name(b).lower() if is_book else b}" if is_book else f"{a} {before} {b}"

    # candidate clues, pick until exactly one permutation satisfies them
    clues: list[tuple[str, Callable[[list[str]], bool]]] = []
    pool: list[tuple[str, Callable[[list[str]], bool]]] = []
    for o in objs:
        pos = order.index(o)
        if pos != 1:
            def clue_pos(p: list[str], o: str = o, pos: int = pos) -> bool:
                return p.index(o) == pos
            pool.append((stmt_pos(o, pos), clue_pos))
    for a, b in itertools.permutations(objs, 2):
        if order.index(a) < order.index(b):
            def clue_rel(p: list[str], a: str = a, b: str = b) -> bool:
                return p.index(a) < p.index(b)
            pool.append((stmt_rel(a, b), clue_rel))
    rnd.shuffle(pool)
    perms = [list(p) for p in itertools.permutations(objs)]
    for clue in pool:
        clues.append(clue)
        if sum(all(f(p) for _, f in clues) for p in perms) == 1:
            break
    def art(o: str) -> str:
        return f"an {o}" if o[0] in "aeiou" else f"a {o}"

    listing = ", ".join(art(o) if is_book else o for o in objs[:-1]) + (f", and {art(objs[-1])}" if is_book else
                                                                        f", and {objs[-1]}")
    text = intro.format(items=listing) + ". ".join(c for c, _ in clues) + "."
    pos = rnd.randrange(3)
    choices = tuple(stmt_pos(o, pos) for o in objs)
    answer = LETTERS[objs.index(order[pos])]
    q = ("The following paragraphs each describe a set of three objects arranged in a fixed order. The statements "
         f"are logically consistent within each paragraph. {text}")
    return Item(id=f"logical_deduction_three_objects-{k}", question=q, answer=answer,
                type="logical_deduction_three_objects", choices=choices, dataset="bbh", grader="choice")


# ---------------------------------------------------------------- date understanding

def _date_understanding(rnd: random.Random, k: int) -> Item:
    base = dt.date(2000, 1, 1) + dt.timedelta(days=rnd.randrange(0, 365 * 30))
    kind = rnd.choice(["days_later", "days_ago", "weeks_later", "yesterday", "tomorrow"])
    if kind == "days_later":
        n = rnd.randint(2, 40)
        target, phrase = base + dt.timedelta(days=n), f"What is the date {n} days from today"
    elif kind == "days_ago":
        n = rnd.randint(2, 40)
        target, phrase = base - dt.timedelta(days=n), f"What is the date {n} days ago"
    elif kind == "weeks_later":
        n = rnd.randint(1, 6)
        target, phrase = base + dt.timedelta(weeks=n), f"What is the date {n} week{'s' if n > 1 else ''} from today"
    elif kind == "yesterday":
        target, phrase = base - dt.timedelta(days=1), "What was the date yesterday"
    else:
        target, phrase = base + dt.timedelta(days=1), "What is the date tomorrow"
    fmt = "%m/%d/%Y"
    wrong: set[dt.date] = set()
    for delta in (1, -1, 7, -7, 30, -30, 365, -365):
        if len(wrong) >= 4:
            break
        d = target + dt.timedelta(days=delta)
        if d != target and rnd.random() < 0.7:
            wrong.add(d)
    while len(wrong) < 4:
        wrong.add(target + dt.timedelta(days=rnd.choice([2, -2, 3, -3, 10, -10])))
    opts = [target, *sorted(wrong)]
    rnd.shuffle(opts)
    q = f"Today is {base.strftime(fmt)}. {phrase} in MM/DD/YYYY?"
    return Item(id=f"date_understanding-{k}", question=q, answer=LETTERS[opts.index(target)],
                type="date_understanding", choices=tuple(d.strftime(fmt) for d in opts), dataset="bbh",
                grader="choice")


# ---------------------------------------------------------------- tracking shuffled objects

def _tracking(rnd: random.Random, k: int) -> Item:
    people = ["Alice", "Bob", "Claire"]
    things = rnd.choice([("ball", ["red", "blue", "green", "yellow", "purple", "pink"]),
                         ("present", ["white", "black", "orange", "brown", "blue", "red"])])
    noun, colours = things
    held = dict(zip(people, rnd.sample(colours, 3)))
    start = ", ".join(f"{p} has {'an' if c[0] in 'aeiou' else 'a'} {c} {noun}" for p, c in held.items())
    swaps = []
    for _ in range(3):
        a, b = rnd.sample(people, 2)
        held[a], held[b] = held[b], held[a]
        swaps.append(f"{a} and {b} swap {noun}s")
    who = rnd.choice(people)
    choices = tuple(f"{c} {noun}" for c in sorted(set(colours) & set(held.values())))
    answer = LETTERS[choices.index(f"{held[who]} {noun}")]
    q = (f"Alice, Bob, and Claire are playing a game. At the start of the game, {start}. As the game progresses, "
         f"pairs of players trade {noun}s. First, {swaps[0]}. Then, {swaps[1]}. Finally, {swaps[2]}. "
         f"At the end of the game, {who} has the")
    return Item(id=f"tracking_shuffled_objects_three_objects-{k}", question=q, answer=answer,
                type="tracking_shuffled_objects_three_objects", choices=choices, dataset="bbh", grader="choice")


# ---------------------------------------------------------------- boolean expressions

def _bool_expr(rnd: random.Random, depth: int) -> tuple[str, bool]:
    if depth == 0 or rnd.random() < 0.3:
        v = rnd.random() < 0.5
        if rnd.random() < 0.3:
            return f"not {v}", not v
        return str(v), v
    (a, va), (b, vb) = _bool_expr(rnd, depth - 1), _bool_expr(rnd, depth - 1)
    op = rnd.choice(["and", "or"])
    return f"( {a} {op} {b} )", (va and vb) if op == "and" else (va or vb)


def _boolean_expressions(rnd: random.Random, k: int) -> Item:
    text, v = _bool_expr(rnd, 2)
    if text.startswith("( ") and text.endswith(" )"):
        text = text[2:-2]
    return Item(id=f"boolean_expressions-{k}", question=f"{text} is", answer=str(v), type="boolean_expressions",
                dataset="bbh", grader="exact")


GENERATORS: dict[str, Callable[[random.Random, int], Item]] = {
    "object_counting": _object_counting,
    "multistep_arithmetic_two": _multistep_arithmetic,
    "navigate": _navigate,
    "geometric_shapes": _geometric_shapes,
    "logical_deduction_three_objects": _logical_deduction,
    "date_understanding": _date_understanding,
    "tracking_shuffled_objects_three_objects": _tracking,
    "boolean_expressions": _boolean_expressions,
}


def generate(per_type: int = 12, seed: int = 2609, types: list[str] | None = None) -> list[Item]:
    """``per_type`` items of each type, reproducible from ``seed``."""
    out = []
    for t in types or list(GENERATORS):
        rnd = random.Random(f"{seed}:{t}")
        for k in range(1, per_type + 1):
            out.append(GENERATORS[t](rnd, k))
    return out
