"""Bounded time per record (issue 28, item 1): the Python `re` patterns that still read data.

Every pattern that reads data was timed on hostile inputs (runs of what each repeat accepts,
near misses at 20k, 40k and 100k characters). The ones that grew faster than the text are
fixed and pinned here, in a child process with a timeout (a regression fails, never hangs);
each fix is checked to find what the old pattern found. The ones that stayed linear are
pinned too, on their worst shapes, so a rewrite that makes one backtrack is caught.
"""

from __future__ import annotations

import io
import random
import re

from pipeline.ingest import count, opening
from tests.test_linear_time import LIMIT, _timed

# ------------------------------------------------------------ lines just under the limit

# Blank lines one byte short of max_record_bytes: `[^\n]{N,}` tried every position of every
# line, each scanning to the line's end (quadratic: 15 s for two 200 KB lines).
NEAR = 200_000
_NEAR_LINES = f"(b' ' * ({NEAR} - 1) + b'\\n') * 3"


def test_blank_lines_just_under_the_limit_are_counted_in_well_under_a_second(tmp_path):
    p = tmp_path / "x.jsonl"
    setup = (
        "from pathlib import Path\nfrom pipeline.ingest.count import count_lines\n"
        f"p = Path({str(p)!r})\np.write_bytes({_NEAR_LINES})\ncount_lines(p, 10)"
    )
    assert _timed(setup, f"assert count_lines(p, {NEAR}) == 0") < LIMIT


def test_blank_lines_just_under_the_limit_are_skipped_in_well_under_a_second():
    setup = (
        "import io\nfrom pipeline.ingest.opening import CHUNK, skip_blank_lines\n"
        f"f = io.BufferedReader(io.BytesIO({_NEAR_LINES} + b'x\\n'), CHUNK)"
    )
    assert _timed(setup, f"assert skip_blank_lines(f, {NEAR}) == (3, None)") < LIMIT


def _texts(seed: int = 7, n: int = 400) -> list[bytes]:
    """Whole blank lines (what both functions get) of lengths around a limit of 20, with CRs."""
    rng = random.Random(seed)
    out = [b"", b"\n", b" " * 21 + b"\n", b" " * 20 + b"\r\n", b"\r" * 21 + b"\n"]
    for _ in range(n):
        lines = [
            bytes(rng.choice(b" \t\r\x0b\x0c") for _ in range(rng.choice([0, 1, 19, 20, 21, 40])))
            for _ in range(rng.randint(1, 6))
        ]
        out.append(b"\n".join(lines) + b"\n")
    return out


def test_over_limit_counts_what_the_old_pattern_counted():
    for limit in (1, 19, 20, 21):
        old = re.compile(rb"[^\n]{%d,}" % (limit + 1))
        for text in _texts():
            want = sum(
                (m.end() - m.start() - (text[m.end() - 1] == 0x0D)) > limit
                for m in old.finditer(text, 0, len(text))
            )
            assert count._over_limit(text, 0, len(text), limit) == want, (limit, text)
            cut = text.find(b"\n") + 1  # from a later line start, as count_lines calls it
            want = sum(
                (m.end() - m.start() - (text[m.end() - 1] == 0x0D)) > limit
                for m in old.finditer(text, cut, len(text))
            )
            assert count._over_limit(text, cut, len(text), limit) == want, (limit, text, cut)


def test_skip_blank_lines_stops_where_the_old_pattern_stopped():
    for limit in (1, 19, 20, 21):
        old = re.compile(rb"[^\n]{%d}" % (limit + 1))
        for text in _texts(seed=8):
            m, new = old.search(text), opening._over(limit).search(text)
            assert (m and m.start()) == (new and new.start()), (limit, text)
            f = io.BufferedReader(io.BytesIO(text + b"x\n"), opening.CHUNK)
            lines = text.split(b"\n")[:-1]
            long = next((k for k, x in enumerate(lines) if len(x) > limit), len(lines))
            assert opening.skip_blank_lines(f, limit) == (long, None), (limit, text)


# ------------------------------------------------------------ the patterns that stay linear

_H = "⟨H⟩"
# (code that makes `x`, call): each took under 40 ms at 100k characters when audited
_LINEAR = [
    ("'a1' * 50_000 + 'g'", "N._HEX.sub(N.HEX, x)"),
    ("'1.0.0' + '-1' * 50_000 + 'x'", "N._NUM.sub(N.NUM, x)"),
    (f"'1.0.0-' + {_H + '-'!r} * 25_000", "N._NUM.sub(N.NUM, x)"),
    ("' >=' * 33_000", "N._NUM.sub(N.NUM, x)"),
    ("'é 1.0.0' + '-1' * 50_000", "N.normalise_text(x)"),
    ("\"'\" + '\\\\' * 100_000", "M.unrepr(x)"),
    ("'github.com/' + 'a' * 100_000", "M.github_repo(x)"),
    ("'```py\\n' + '`' * 50_000 + ' ' * 50_000 + 'x'", "G.split_suggestions(x)"),
    ("('\\n' + ' ' * 100) * 1000 + 'x'", "G.split_suggestions(x)"),
    ("'/repos/a/' + 'b' * 100_000", "G._repo_change(x, None)"),
    ("'\\n' + '\\\\' * 100_000", "T.escape_field(x); T.unescape_field(x)"),
    ("b'[\"' + b'\\\\\"' * 50_000", "J._TOKEN.search(x, 1); J._STRING.match(x, 1)"),
]


def test_the_data_regexes_that_stay_on_python_re_are_linear_on_their_worst_shapes():
    """All in one child (its imports once); one shape over LIMIT / 4 names itself."""
    setup = (
        "from pipeline.shapes import normalise as N\nfrom pipeline.ingest import mapping as M\n"
        "from pipeline.ingest import jsonstream as J\nfrom pipeline import template as T\n"
        "from pipeline.ingest.sources import github as G\n"
        f"cases = [(eval(make), call) for make, call in {_LINEAR!r}]"
    )
    run = (
        "slow = []\nfor x, call in cases:\n"
        "    t0 = time.perf_counter()\n    exec(call)\n    s = time.perf_counter() - t0\n"
        f"    slow += [f'{{call}}: {{s:.3f}} s'] if s > {LIMIT / 4} else []\n"
        "assert not slow, slow"
    )
    assert _timed(setup, run) < LIMIT
