"""Version tokens fold whole: range operator, `v`, pre-release / build suffix and wildcard are
one NUM, so a dependency's bumps are one shape however each is spelled (npm, Cargo, Go, Maven,
Python, pre-commit); hunks bumping several dependencies group by shape whatever their names;
and what code spells like a version stays apart."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.config import ShapesConfig
from pipeline.shapes import NUM, REF, edit_key_expr, edit_shape, group_shapes, shape_columns
from pipeline.shapes import kernels as K
from pipeline.shapes.normalise import (
    edit_shape_refs,
    normalise_line,
    normalise_text,
    ref_names,
    ref_names_expr,
    ref_sub,
    ref_sub_expr,
)
from pipeline.shapes.scan import normalise_lines
from tests.test_shapes import _jsonl_items, groups, items

# ------------------------------------------------------------------------ one token


@pytest.mark.parametrize(
    "line, want",
    [
        # npm: ranges, pre-releases, wildcards
        ('"lodash": "~1.6.3",', f'"lodash": "{NUM}",'),
        ('"lodash": "^2.0.0",', f'"lodash": "{NUM}",'),
        ('"lodash": ">=1.2.0",', f'"lodash": "{NUM}",'),
        ('"lodash": "3.0.0beta2",', f'"lodash": "{NUM}",'),
        ('"lodash": "2.0.0-beta.2",', f'"lodash": "{NUM}",'),
        ('"lodash": "1.10.x",', f'"lodash": "{NUM}",'),
        ('"lodash": "2.*",', f'"lodash": "{NUM}",'),
        ('"react": "^18.3.0-next.4",', f'"react": "{NUM}",'),
        ('"typescript": "^4.5.0-dev.20211023",', f'"typescript": "{NUM}",'),
        ('"version": "0.20.0-0",', f'"version": "{NUM}",'),
        ('"zod": "^3.25.0 || ^4.0.0"', f'"zod": "{NUM} || {NUM}"'),
        ('"node": ">=1.2.7 <1.3.0"', f'"node": "{NUM} {NUM}"'),
        # Cargo
        ('serde = "1.0.150"', f'serde = "{NUM}"'),
        ('version = "=0.3.0-alpha.1"', f'version = "{NUM}"'),
        (
            'clap = { version = "4.1", features = ["derive"] }',
            f'clap = {{ version = "{NUM}", features = ["derive"] }}',
        ),
        # go.mod
        ("github.com/x/y v1.3.0-rc.1", f"github.com/x/y {NUM}"),
        ("github.com/x/y v2.0.0+incompatible // indirect", f"github.com/x/y {NUM} // indirect"),
        ("golang.org/x/net v0.0.0-20210405180319-a5a99cb37ef4", f"golang.org/x/net {NUM}"),
        # Maven
        ("<version>1.2.3-SNAPSHOT</version>", f"<version>{NUM}</version>"),
        ("<version>5.4.2.Final</version>", f"<version>{NUM}</version>"),
        ("<version>5.0.0.RELEASE</version>", f"<version>{NUM}</version>"),
        ("<fest.version>2.0M8</fest.version>", f"<fest.version>{NUM}</fest.version>"),
        ("<truth.version>1.0-SNAPSHOT</truth.version>", f"<truth.version>{NUM}</truth.version>"),
        # Python
        ("foo~=1.2", f"foo{NUM}"),
        ("bar>=2.0,<3", f"bar{NUM},<{NUM}"),
        ("baz==1.0a1.dev0 ; python_version<'3.8'", f"baz{NUM} ; python_version<'{NUM}'"),
        ("qux!=2.0.post1", f"qux{NUM}"),
        # pre-commit
        ("rev: v4.5.0", f"rev: {NUM}"),
        ("rev: 6.1.0", f"rev: {NUM}"),
        # and what is no version keeps what is not a digit
        ("if x >= 3:", f"if x >= {NUM}:"),
        ("while(x>=3){", f"while(x>={NUM}){{"),
        ("for(i=0;i<10;i++)", f"for(i={NUM};i<{NUM};i++)"),
        ("y = x^2 + (~1)", f"y = x^{NUM} + (~{NUM})"),
        ("it took ~25 GB", f"it took ~{NUM} GB"),
        ('<span class="strong">91.28% </span>', f'<span class="strong">{NUM}% </span>'),
        ("x = (1-alpha)*y + 1.0-beta", f"x = ({NUM}-alpha)*y + {NUM}-beta"),
        (
            "float32 utf8 h2 x86_64 python3.6.1",
            f"float{NUM} utf{NUM} h{NUM} x{NUM}_{NUM} python{NUM}",
        ),
        ("a-1, 1..10, range(1, 10)", f"a-{NUM}, {NUM}..{NUM}, range({NUM}, {NUM})"),
        (
            "1.0-betamax 1.prefix channel.port2.postMessage",
            f"{NUM}-betamax {NUM}.prefix channel.port{NUM}.postMessage",
        ),
    ],
)
def test_version_tokens_fold_whole(line: str, want: str) -> None:
    assert normalise_line(line) == want


# ------------------------------------------------------------------------ bumps group


def _bumps(path: str, pairs: list[tuple[str, str]], **extra) -> list[dict]:
    return [
        dict(path=path, change=f"{path}{k}", before=b, after=a, comment=f"bump {k}", **extra)
        for k, (b, a) in enumerate(pairs)
    ]


ECOSYSTEMS = {
    "package.json": [
        ('    "lodash": "~1.6.3",', '    "lodash": "~1.6.4",'),
        ('    "lodash": "^2.0.0",', '    "lodash": "^2.1.0",'),
        ('    "lodash": "3.0.0beta2",', '    "lodash": "3.0.0beta3",'),
        ('    "lodash": "2.0.0-beta.2",', '    "lodash": "^2.0.0",'),
        ('    "lodash": "1.10.x",', '    "lodash": "1.11.x",'),
        ('    "lodash": ">=1.2.0",', '    "lodash": ">=1.3.0",'),
        ('    "husky": "^4.3.4",', '    "husky": "^7.0.4",'),  # another dependency: its name is REF
    ],
    "Cargo.toml": [
        ('serde = "1.0.150"', 'serde = "1.0.152"'),
        ('futures = "=0.3.0-alpha.1"', 'futures = "=0.3.0-alpha.2"'),
        ('futures = "=0.3.0-alpha.2"', 'futures = "0.3.1"'),
    ],
    "go.mod": [
        ("\tgithub.com/x/y v1.2.3", "\tgithub.com/x/y v1.3.0-rc.1"),
        ("\tgithub.com/x/y v1.3.0-rc.1", "\tgithub.com/x/y v1.3.0"),
        ("\tgithub.com/a/b v2.0.0+incompatible", "\tgithub.com/a/b v2.1.0+incompatible"),
        ("\tgolang.org/x/net v0.0.0-20210405180319-a5a99cb37ef4", "\tgolang.org/x/net v0.1.0"),
    ],
    "pom.xml": [
        ("  <version>1.2.3-SNAPSHOT</version>", "  <version>1.2.3</version>"),
        ("  <version>1.2.3</version>", "  <version>1.2.4-SNAPSHOT</version>"),
        ("  <version>4.1.0.Final</version>", "  <version>4.2.0.Final</version>"),
    ],
    "requirements.txt": [
        ("foo~=1.2", "foo~=1.3"),
        ("foo>=1.2", "foo==1.4.0"),
        ("foo==1.4.0", "foo==1.5.0rc1"),
    ],
    ".pre-commit-config.yaml": [
        ("    rev: v4.5.0", "    rev: 6.1.0"),
        ("    rev: v5.0.0", "    rev: v5.0.1"),
    ],
}


@pytest.mark.parametrize("path", list(ECOSYSTEMS))
def test_bumps_of_one_file_are_one_digit_only_group(path: str) -> None:
    """Each ecosystem's bumps, spelled every which way, land in one repo group."""
    df = items(_bumps(path, ECOSYSTEMS[path]))
    shapes = group_shapes(df, ShapesConfig()).filter(pl.col("scope") == "repo")
    assert shapes["digit_only"].all(), shapes.filter(~pl.col("digit_only"))["shape_text"].to_list()
    assert shapes["group_id"].n_unique() == 1, shapes["shape_text"].unique().to_list()


def test_bump_shapes_name_what_they_pin_by_ref() -> None:
    want = {
        '"lodash": "~1.6.3",': f'-"{REF}": "{NUM}",\n+"{REF}": "{NUM}",',
        'serde = "1.0.150"': f'-{REF} = "{NUM}"\n+{REF} = "{NUM}"',
        "github.com/x/y v1.2.3": f"-{REF} {NUM}\n+{REF} {NUM}",
        "<truth.version>0.25</truth.version>": (
            f"-<{REF}.version>{NUM}</{REF}.version>\n+<{REF}.version>{NUM}</{REF}.version>"
        ),
        # a release bump names no dependency: `version` stays
        '"version": "1.2.0",': f'-"version": "{NUM}",\n+"version": "{NUM}",',
        'version = "0.4.1dev0"': f'-version = "{NUM}"\n+version = "{NUM}"',
        # numbers that are no quoted version keep their key
        '"timeout": 30,': f'-"timeout": {NUM},\n+"timeout": {NUM},',
    }
    for before, shape in want.items():
        after = before.replace("1", "2").replace("0.25", "0.28").replace("30", "60")
        assert edit_shape(before, after) == (shape, True), before


def test_cargo_inline_table_change_need_not_fold() -> None:
    """A plain requirement turned into a table is a real edit, not a bump."""
    before, after = 'clap = "4.0"', 'clap = { version = "4.1", features = ["derive"] }'
    assert not edit_shape(before, after)[1]


def test_multi_dependency_hunks_group_by_shape_whatever_the_names() -> None:
    def deps(*pairs: tuple[str, str, str]) -> tuple[str, str]:
        b = "\n".join(f'    "{n}": "{v}",' for n, v, _ in pairs)
        a = "\n".join(f'    "{n}": "{w}",' for n, _, w in pairs)
        return b, a

    two_a = deps(("karma", "^0.12.31", "^0.12.36"), ("karma-coverage", "^0.2.7", "^0.4.2"))
    two_b = deps(("coveralls", "2.11.6", "2.11.8"), ("es6-promise", "3.0.2", "^3.1.2"))
    two_c = deps(("@babel/core", "~7.1.0", "~7.2.0-rc.1"), ("webpack", "1.10.x", "1.11.x"))
    three = deps(("a", "1.0.0", "1.0.1"), ("b", "2.0.0", "2.0.1"), ("c", "3.0.0", "3.0.1"))
    one = deps(("husky", "^4.3.4", "^7.0.4"))
    cargo_a = ('clap = "4.0"\nclap_complete = "4.0"', 'clap = "4.1"\nclap_complete = "4.1"')
    cargo_b = (
        'regex = "1.5.4"\nregex-syntax = "0.6.25"',
        'regex = "1.6.0"\nregex-syntax = "0.6.27"',
    )
    df = items(
        _bumps("package.json", [two_a, two_b, two_c, three, one])
        + _bumps("Cargo.toml", [cargo_a, cargo_b])
    )
    ids = df["id"].to_list()
    shapes = group_shapes(df, ShapesConfig())
    repo = groups(shapes, "repo")
    assert set(ids[:3]) in repo.values()  # the two-dependency bumps
    assert {ids[3]} in repo.values() and {ids[4]} in repo.values()  # three, one: own shapes
    assert set(ids[5:]) in repo.values()  # two-crate bumps in Cargo.toml
    assert shapes.filter(pl.col("scope") == "repo")["digit_only"].all()
    # context_key tells what is bumped apart, as it tells `uses:` actions apart
    ctx = groups(group_shapes(df, ShapesConfig(context_key=True)), "repo")
    assert all({i} in ctx.values() for i in ids)


@pytest.mark.parametrize(
    "a, b",
    [
        # a comparison's operator is code: changing it is no bump
        (("if x >= 1:", "if x >= 2:"), ("if x >= 1:", "if x > 1:")),
        (("while(x>=3){", "while(x>=4){"), ("while(x>=3){", "while(x>3){")),
        (("i=0.5;", "i=0.6;"), ("i=0.5;", "i==0.5;")),
        (("y = x^2", "y = x^3"), ("y = x^2", "y = x2")),
        (("took ~25 GB", "took ~30 GB"), ("took 25 GB", "took ~25 GB")),
        # identifiers with digits: a rename is digit-only, as before, and keeps its stem
        (("x = np.float32(a)", "x = np.float16(a)"), ("x = np.int32(a)", "x = np.int64(a)")),
        (("<h1>Title</h1>", "<h2>Title</h2>"), ("<p>Title</p>", "<b>Title</b>")),
        (
            ("for i in range(1, 10):", "for i in range(1, 20):"),
            ("for i in range(1, 10):", "for i in range(10):"),
        ),
        (
            ("let s = &v[1..10];", "let s = &v[1..20];"),
            ("let s = &v[1..10];", "let s = &v[1..=10];"),
        ),
        (("n = a-1", "n = a-2"), ("n = a-1", "n = a+1")),
        (("z = (1-alpha)*x", "z = (1-beta)*x"), ("z = (1-alpha)*x", "z = (2-alpha)*x")),
        (("p = [0.5, 1.5]", "p = [0.5, 2.5]"), ("p = [0.5, 1.5]", "p = [0.5, 1.5-eps]")),
    ],
)
def test_distinct_code_edits_stay_apart(a: tuple[str, str], b: tuple[str, str]) -> None:
    df = items(
        [
            dict(path="m.py", change="1", before=a[0], after=a[1]),
            dict(path="m.py", change="2", before=b[0], after=b[1]),
        ]
    )
    x, y = df["id"].to_list()
    repo = groups(group_shapes(df, ShapesConfig()), "repo")
    assert {x} in repo.values() and {y} in repo.values()


def test_a_digit_change_in_code_stays_a_digit_change() -> None:
    assert edit_shape("if x >= 1:", "if x >= 2:") == (f"-if x >= {NUM}:\n+if x >= {NUM}:", True)
    assert edit_shape("x = np.float32(a)", "x = np.float16(a)") == (
        f"-x = np.float{NUM}(a)\n+x = np.float{NUM}(a)",
        True,
    )
    assert edit_shape("<h1>Title</h1>", "<h2>Title</h2>")[1]


# ------------------------------------------------------------------------ engines agree

# version syntax in all its pieces, and what code puts next to digits
PIECES = ["1", "2.0", "1.2.3", "v", "~", "^", ">=", "<=", "==", "!=", "~=", ">", "<", "=", "-", "+"]
PIECES += [".", "..", ".x", ".*", "*", "x", "X", "a1", "b3", "rc", "-rc.1", "beta", "-beta.2"]
PIECES += ["alpha", "-alpha", "dev", ".dev0", "next", "preview", "pre", "post", "SNAPSHOT"]
PIECES += ["-SNAPSHOT", ".Final", "RELEASE", "GA", "M", "M1", "+build.5", "+incompatible"]
PIECES += ["-20211023", "-a5a99cb37ef4", "deadbeef1", "float32", "x86_64", "h2", "_", " ", '"']
PIECES += ["'", ",", "(", ")", "<p>", "é", "\x1c"]
version_line = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)


@settings(max_examples=500, deadline=None)
@given(st.lists(version_line, min_size=1, max_size=6))
def test_compiled_scan_and_polars_equal_the_python_reference(lines: list[str]) -> None:
    data, offsets = K.buffers(pa.array(["\n".join(lines)], pa.large_string()))
    starts, ends, _ = K.split_lines(data, offsets, np.ones(1, np.bool_))
    _, _, ndata, noff, odd = normalise_lines(data, starts, ends)
    got = K.from_buffers(ndata, noff).to_pylist()
    for raw, norm, flagged in zip(lines, got, odd, strict=True):
        if not flagged:
            assert norm == normalise_line(raw), raw
    text = "\n".join(lines)
    if "\x1c" in text:  # whitespace to Python's regex only: the stage takes the reference
        return
    assert pl.DataFrame({"t": [text]}).select(edit_key_expr("t")).item() == normalise_text(text)


manifest_line = st.builds(
    lambda fmt, name, v: fmt.format(n=name, v=v),
    st.sampled_from(
        [
            '    "{n}": "{v}",',
            "'{n}': '{v}'",
            '{n} = "{v}"',
            '"{n}" = "{v}"',
            '{n} = {{ version = "{v}", features = ["x"] }}',
            "\t{n} {v} // indirect",
            "require {n} {v}",
            "<{n}.version>{v}</{n}.version>",
            "  - uses: {n}@{v}",
            "{n}{v}",
        ]
    ),
    st.sampled_from(
        ["lodash", "@babel/core", "es6-promise", "github.com/x/y", "version", "vers", "é"]
    ),
    st.sampled_from(
        ["1.2.3", "^2.0.0", "~1.6", "=0.3.0-alpha.1", "v1.3.0-rc.1", "1.0-SNAPSHOT", "2.*"]
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(manifest_line, manifest_line), min_size=1, max_size=4))
def test_ref_rules_in_polars_equal_the_python_reference(pairs: list[tuple[str, str]]) -> None:
    """Manifest hunks through the stage's columns (kernels, polars REF rules) and the per-item
    reference; and the REF rules alone over their shapes."""
    rows = [("\n".join(a for a, _ in pairs), "\n".join(b for _, b in pairs))]
    rows += [(a, a.translate(str.maketrans("0123", "4567"))) for a, _ in pairs]
    df = pl.DataFrame(rows, schema=["before", "after"], orient="row").with_columns(
        lines_removed=pl.lit(1, pl.Int32), lines_added=pl.lit(1, pl.Int32), context=pl.lit("")
    )
    got = shape_columns(df, context_key=True)
    for r, (b, a) in zip(got.iter_rows(named=True), rows, strict=True):
        shape, digit, names = edit_shape_refs(b, a, 1, 1)
        assert (r["shape_text"], r["digit_only"]) == (shape, digit)
        assert r["_ctx"] == ("\x1e" + names if names else "")
    raw = pl.DataFrame({"s": [edit_shape(b, a)[0] for b, a in rows]})
    subbed = raw.select(ref_sub_expr(pl.col("s")), ref_names_expr(pl.col("s")).alias("n"))
    for s, sub, n in zip(raw["s"], subbed["s"], subbed["n"], strict=True):
        if all(c.isascii() or c in "⟨⟩" for c in s):  # else vectorised takes the reference
            assert (sub, n) == (ref_sub(s), ref_names(s)), s


# ------------------------------------------------------------------------ real history


def test_real_package_json_bumps_of_one_dependency_are_one_group() -> None:
    """axios' package.json: every bump of one dependency (and trailing comma), `1.2.3` ->
    `^1.2.3` and `0.20.0-0` included, in one repo group (before, `^`, `~` and pre-releases
    split them by spelling)."""
    df = _jsonl_items("axios.jsonl.gz")
    line = r'^\s*"([@\w./-]+)": "[~^]?(?:>=)?[0-9][0-9A-Za-z.+-]*",?$'
    df = df.filter(
        pl.col("path").str.ends_with("package.json")
        & pl.col("before").str.contains(line)
        & pl.col("after").str.contains(line)
        & (pl.col("before").str.extract(line) == pl.col("after").str.extract(line))
        & (pl.col("before") != pl.col("after"))
    ).with_columns(dep=pl.col("before").str.extract(line) + pl.col("before").str.ends_with(","))
    assert df.height > 50
    shapes = group_shapes(df, ShapesConfig()).filter(pl.col("scope") == "repo").sort("_row")
    per_dep = df.with_columns(g=shapes["group_id"], digit=shapes["digit_only"]).group_by("dep")
    split = per_dep.agg(n=pl.len(), groups=pl.col("g").n_unique()).filter(pl.col("groups") > 1)
    assert split.height == 0, split
    assert shapes["digit_only"].all()
