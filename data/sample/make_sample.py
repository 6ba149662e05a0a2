"""Write the sample corpus: invented review data in the shapes of three real source kinds.

The files next to this script are its output, byte-identical on every run (one seeded
`random.Random`, fixed order, sorted JSON keys). Nothing here is copied from real data sets:
repos, people and code are made up. Run `python data/sample/make_sample.py` to regenerate.

- github_comments.json: pull-request review comments as the GitHub REST API returns them.
- refinement.jsonl: CodeReviewer-style refinement records (old, new, comment).
- edits.csv: a generic CSV export of before/after edits (edits.jsonl: the same rows in the
  item's own field names, for `editcurate run data/sample/edits.jsonl` with no config).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import random
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
SEED = 20241007
API = "https://api.github.com/repos"

HUMANS = [
    ("jdoyle", 4410937),
    ("mira-k", 28871502),
    ("sanjayr", 9173345),
    ("elenavoss", 61220874),
    ("tkowalski", 1736604),
    ("quokka-dev", 83310457),
    ("b-ortiz", 50128833),
    ("haruki-t", 33904718),
    ("nadia-s", 70442096),
    ("pwhitfield", 2298110),
    ("grace-liu", 45087321),
    ("dmitri-o", 12873650),
]
BOTS = {
    "coderabbitai[bot]": 139204516,
    "github-actions[bot]": 41900017,
    "sourcery-ai[bot]": 58611204,
}

BLOCK_RE = re.compile(r"^`{3,}suggestion\r?$", re.M)
HUNK_RE = re.compile(r"^@@ -(\d+),(\d+) \+(\d+),(\d+) @@")
VAR_RE = re.compile(r"@(\w+)@")


@dataclass
class T:
    """One review-comment template; each variant (placeholder values) gives one comment.

    `hunk` is the diff hunk body with its +/-/space prefixes (a "" line is a blank context
    line); the last `span` lines are the commented ones. `sugg` replaces them (None: no
    suggestion, "": delete them). `body` is the comment text, @S@ being the suggestion block.
    """

    repo: str
    path: str
    hunk: str
    sugg: str | None
    lead: str = ""
    body: str = "@lead@\n@S@"
    span: int = 1
    section: str = ""
    user: str = ""
    crlf: bool = False
    tabs: bool = False  # Go: leading 4-space groups become tabs
    new_file: bool = False
    variants: tuple[dict[str, str], ...] = ({},)


def fill(text: str, values: dict[str, str]) -> str:
    return VAR_RE.sub(lambda m: values[m.group(1)], text)


def tabify(text: str, prefixed: bool) -> str:
    out = []
    for line in text.split("\n"):
        head, rest = (line[:1], line[1:]) if prefixed else ("", line)
        m = re.match(r"(?:    )+", rest)
        if m:
            rest = "\t" * (len(m.group()) // 4) + rest[m.end() :]
        out.append(head + rest)
    return "\n".join(out)


def block(text: str) -> str:
    """A suggestion block; four backticks when the replacement holds a code fence."""
    fence = "````" if "```" in text else "```"
    inner = f"{text}\n" if text else ""
    return f"{fence}suggestion\n{inner}{fence}"


TEMPLATE_DIR = HERE / "templates"


def load_templates() -> list[T]:
    """templates/github/*.yaml in file-name order, each a list of T's fields (variants: a
    list of placeholder maps): the order draws the sample's random choices."""
    out = []
    for f in sorted((TEMPLATE_DIR / "github").glob("*.yaml")):
        for d in yaml.safe_load(f.read_text(encoding="utf-8")):
            out.append(T(**{**d, "variants": tuple(d.get("variants", [{}]))}))
    return out


TEMPLATES = load_templates()

# templates/github_threads.yaml: the founding pair and the PR authors' replies
_THREADS = yaml.safe_load((TEMPLATE_DIR / "github_threads.yaml").read_text(encoding="utf-8"))
PRE_COMMIT: str = _THREADS["pre_commit"]
FOUNDING: list[tuple[int, str]] = [(f["line"], f["body"]) for f in _THREADS["founding"]]
REPLIES: list[str] = _THREADS["replies"]


def sha(rng: random.Random) -> str:
    return f"{rng.getrandbits(160):040x}"


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def make_hunk(rng: random.Random, t: T, body_lines: list[str]) -> tuple[str, int]:
    """A valid hunk for these lines; returns it and the new-side number of its last line."""
    old_n = sum(1 for x in body_lines if x[0] in "- ")
    new_n = sum(1 for x in body_lines if x[0] in "+ ")
    if t.new_file:
        a, c = 0, 1
    else:
        a = rng.randint(3, 380)
        c = max(1, a + rng.randint(-4, 12))
    header = f"@@ -{a},{old_n} +{c},{new_n} @@" + (f" {t.section}" if t.section else "")
    return "\n".join([header, *body_lines]), c + new_n - 1


def check_comment(cm: dict) -> None:
    """The commented lines start_line..line are the last RIGHT-side lines of the hunk."""
    lines = cm["diff_hunk"].split("\n")
    m = HUNK_RE.match(lines[0])
    assert m, cm["diff_hunk"]
    a, b, c, d = map(int, m.groups())
    body = lines[1:]
    assert body and all(x[:1] in ("+", "-", " ") for x in body), cm["diff_hunk"]
    assert sum(x[0] in "- " for x in body) == b and sum(x[0] in "+ " for x in body) == d
    numbers = []
    n = c
    for x in body:
        numbers.append(n if x[0] != "-" else None)
        n += x[0] != "-"
    start = cm["start_line"] or cm["line"]
    k = cm["line"] - start + 1
    assert k >= 1 and len(body) >= k
    assert all(x[0] in "+ " for x in body[-k:]), cm["diff_hunk"]
    assert numbers[-k:] == list(range(start, cm["line"] + 1)), (numbers, start, cm["line"])
    assert cm["position"] == len(body) and cm["side"] == "RIGHT"
    assert cm["original_line"] == cm["line"]
    assert (cm["start_side"] is None) == (cm["start_line"] is None)
    for fence in re.findall(r"^(`{3,})suggestion$", cm["body"].replace("\r\n", "\n"), re.M):
        assert fence in ("```", "````")


def commented_text(cm: dict) -> list[str]:
    start = cm["start_line"] or cm["line"]
    tail = cm["diff_hunk"].split("\n")[-(cm["line"] - start + 1) :]
    return [x[1:] for x in tail]


class Github:
    """Builds comments on invented PRs; ids and times are handed out at the end, in order."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.prs: dict[str, list[dict]] = {}
        self.numbers: dict[str, set[int]] = {}
        self.assoc: dict[tuple[str, str], str] = {}

    def new_pr(self, repo: str) -> dict:
        used = self.numbers.setdefault(repo, set())
        n = self.rng.randint(40, 2400)
        while n in used:
            n += 1
        used.add(n)
        author = self.rng.choice(HUMANS)
        pr = {
            "repo": repo,
            "number": n,
            "author": author,
            "head": sha(self.rng),
            "prev": sha(self.rng),
        }
        self.prs.setdefault(repo, []).append(pr)
        return pr

    def pick_pr(self, repo: str) -> dict:
        have = self.prs.get(repo, [])
        if len(have) < 3 and (not have or self.rng.random() < 0.45):
            return self.new_pr(repo)
        return self.rng.choice(have)

    def comment(
        self, pr: dict, user: str, path: str, hunk: str, last: int, span: int, body: str
    ) -> dict:
        rng = self.rng
        if user in BOTS:
            who, assoc = (user, BOTS[user], "Bot"), "NONE"
        else:
            who = (user, dict(HUMANS)[user], "User")
            choices = ["MEMBER", "MEMBER", "COLLABORATOR", "CONTRIBUTOR", "OWNER"]
            assoc = self.assoc.setdefault((pr["repo"], user), rng.choice(choices))
        start = last - span + 1 if span > 1 else None
        outdated = rng.random() < 0.12
        return {
            "_pr": pr,
            "_review": (pr["repo"], pr["number"], who[0]),
            "path": path,
            "diff_hunk": hunk,
            "position": len(hunk.split("\n")) - 1,
            "original_position": len(hunk.split("\n")) - 1,
            "commit_id": pr["head"],
            "original_commit_id": pr["prev"] if outdated else pr["head"],
            "user": {"login": who[0], "id": who[1], "type": who[2]},
            "body": body,
            "author_association": assoc,
            "start_line": start,
            "original_start_line": start,
            "start_side": "RIGHT" if start else None,
            "line": last,
            "original_line": last,
            "side": "RIGHT",
            "subject_type": "line",
        }

    def reviewer(self, pr: dict) -> str:
        return self.rng.choice([h[0] for h in HUMANS if h[0] != pr["author"][0]])


def build_github(rng: random.Random) -> tuple[list[dict], dict[str, int]]:
    gh = Github(rng)
    units: list[list[dict]] = []
    for t in TEMPLATES:
        for v in t.variants:
            repo = v.get("repo", t.repo)
            lines = [x if x else " " for x in fill(t.hunk, v).split("\n")]
            if t.tabs:
                lines = tabify("\n".join(lines), prefixed=True).split("\n")
            hunk, last = make_hunk(rng, t, lines)
            values = dict(v)
            values["lead"] = fill(t.lead, v)
            if t.sugg is not None:
                sugg = fill(t.sugg, v)
                values["S"] = block(tabify(sugg, prefixed=False) if t.tabs else sugg)
            body = fill(t.body, values)
            if t.crlf:
                body = body.replace("\n", "\r\n")
            pr = gh.pick_pr(repo)
            user = t.user or gh.reviewer(pr)
            units.append([gh.comment(pr, user, fill(t.path, v), hunk, last, t.span, body)])
    # The founding pair: two version bumps on one new .pre-commit-config.yaml, one review.
    pr = gh.new_pr("tidewater-io/harbor")
    user = gh.reviewer(pr)
    pair = []
    for last, body in FOUNDING:
        lines = PRE_COMMIT.split("\n")[:last]
        hunk = f"@@ -0,0 +1,{last} @@\n" + "\n".join(lines)
        cm = gh.comment(pr, user, ".pre-commit-config.yaml", hunk, last, 1, body)
        cm["original_commit_id"] = cm["commit_id"]
        pair.append(cm)
    assert commented_text(pair[0]) == ["    rev: v4.5.0"]
    assert commented_text(pair[1]) == ["    rev: 6.1.0"]
    units.append(pair)
    rng.shuffle(units)

    t = datetime(2024, 10, 7, 8, 0, 0, tzinfo=timezone.utc)
    comments: list[dict] = []
    for unit in units:
        t += timedelta(minutes=rng.randint(5, 400), seconds=rng.randint(0, 59))
        for cm in unit:
            t += timedelta(seconds=rng.randint(20, 300))
            cm["_t"] = t
            comments.append(cm)

    # Replies from the PR author on a few suggestion threads (never on the founding pair).
    candidates = [c for c in comments if BLOCK_RE.search(c["body"]) and c not in pair]
    replies = []
    for text, parent in zip(REPLIES, rng.sample(candidates, len(REPLIES)), strict=True):
        pr = parent["_pr"]
        reply = dict(parent)
        reply["user"] = {"login": pr["author"][0], "id": pr["author"][1], "type": "User"}
        reply["author_association"] = gh.assoc.setdefault(
            (pr["repo"], pr["author"][0]), rng.choice(["MEMBER", "CONTRIBUTOR"])
        )
        reply["body"] = fill(text, {"sha": sha(rng)[:7], "num": str(rng.randint(50, 900))})
        reply["_parent"] = parent
        reply["_review"] = ("reply", len(replies))
        reply["_t"] = parent["_t"] + timedelta(minutes=rng.randint(30, 2000))
        replies.append(reply)
    comments.extend(replies)
    comments.sort(key=lambda c: c["_t"])

    next_id, next_review = 1_790_118_000, 2_351_402_000
    reviews: dict[tuple, int] = {}
    for cm in comments:
        next_id += rng.randint(1, 40_000)
        cm["id"] = next_id
        if cm["_review"] not in reviews:
            next_review += rng.randint(1, 9_000)
            reviews[cm["_review"]] = next_review
        cm["pull_request_review_id"] = reviews[cm["_review"]]
    out = []
    for cm in comments:
        pr = cm.pop("_pr")
        created = cm.pop("_t")
        parent = cm.pop("_parent", None)
        cm.pop("_review")
        if parent is not None:
            cm["in_reply_to_id"] = parent["id"]
        edited = rng.random() < 0.15
        cm["created_at"] = iso(created)
        cm["updated_at"] = iso(created + timedelta(minutes=rng.randint(1, 90) if edited else 0))
        cm["url"] = f"{API}/{pr['repo']}/pulls/comments/{cm['id']}"
        web = f"https://github.com/{pr['repo']}/pull/{pr['number']}"
        cm["html_url"] = f"{web}#discussion_r{cm['id']}"
        cm["pull_request_url"] = f"{API}/{pr['repo']}/pulls/{pr['number']}"
        check_comment(cm)
        out.append(cm)
    ids = {c["id"] for c in out}
    assert len(ids) == len(out)
    assert all(c["in_reply_to_id"] in ids for c in out if "in_reply_to_id" in c)
    stats = {
        "comments": len(out),
        "with_suggestion": sum(bool(BLOCK_RE.search(c["body"])) for c in out),
        "suggestion_blocks": sum(len(BLOCK_RE.findall(c["body"])) for c in out),
        "no_suggestion": sum(not BLOCK_RE.search(c["body"]) for c in out),
        "replies": sum("in_reply_to_id" in c for c in out),
        "bot": sum(c["user"]["type"] == "Bot" for c in out),
    }
    return out, stats


# ---------------------------------------------------------------------------- refinement
# templates/refinement.yaml: records (lang, repo, old, new, comment) and their variants
_REFINEMENT = yaml.safe_load((TEMPLATE_DIR / "refinement.yaml").read_text(encoding="utf-8"))
REFINEMENT = [
    (r["lang"], r["repo"], r["old"], r["new"], r["comment"]) for r in _REFINEMENT["records"]
]
REFINEMENT_VARIANTS: dict[str, list[dict[str, str]]] = _REFINEMENT["variants"]


def build_refinement(rng: random.Random) -> list[dict]:
    out = []
    rid = 10_417
    for lang, repo, old, new, comment in REFINEMENT:
        m = VAR_RE.search(old)
        for v in REFINEMENT_VARIANTS[m.group(1)] if m else [{}]:
            rid += rng.randint(1, 900)
            o, n, c = fill(old, v), fill(new, v), fill(comment, v)
            if lang == "go":
                o, n = tabify(o, prefixed=True), tabify(n, prefixed=True)
            prefixed = len(out) % 2 == 0
            for text in (o, n):
                assert all(x[:1] in "+ " for x in text.split("\n")), text
            if not prefixed:
                o = "\n".join(x[1:] for x in o.split("\n"))
                n = "\n".join(x[1:] for x in n.split("\n"))
            out.append(
                {
                    "old": o,
                    "new": n,
                    "comment": c,
                    "id": rid,
                    "repo": v.get("repo", repo),
                    "lang": lang,
                }
            )
    return out


# ---------------------------------------------------------------------------- csv
# templates/edits.yaml: the rows, their @integrity@ and @sha256@ drawn where they stand
_EDITS = yaml.safe_load((TEMPLATE_DIR / "edits.yaml").read_text(encoding="utf-8"))
EDIT_ROWS: list[dict] = _EDITS["rows"]
DRAWS = {
    "integrity": lambda r: "sha512-" + base64.b64encode(r.randbytes(64)).decode(),
    "sha256": lambda r: f"{r.getrandbits(256):064x}",
}


def build_edits(rng: random.Random) -> list[list[str]]:
    def draw(text: str) -> str:
        return VAR_RE.sub(lambda m: DRAWS[m.group(1)](rng), text)

    # every row's values first (in order), then the times: the order draws the choices
    rows = [
        {**row, "before": draw(row["before"]), "after": draw(row["after"])} for row in EDIT_ROWS
    ]
    t = datetime(2024, 3, 4, 9, 0, 0, tzinfo=timezone.utc)
    out = []
    for row in rows:
        t += timedelta(hours=rng.randint(3, 140), minutes=rng.randint(0, 59))
        created = iso(t)
        if hours := row.get("utc_offset_hours"):  # a couple of exports kept the local offset
            local = t + timedelta(hours=hours)
            created = local.strftime("%Y-%m-%dT%H:%M:%S") + f"+{hours:02d}:00"
        fields = ("repo", "pr", "path", "before", "after", "comment", "reviewer")
        out.append([str(row[k]) for k in fields] + [created])
    return out


# ---------------------------------------------------------------------------- write
def write_text(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def main() -> None:
    rng = random.Random(SEED)
    comments, gh_stats = build_github(rng)
    refinement = build_refinement(rng)
    edits = build_edits(rng)
    header = [
        "repo",
        "pr",
        "file",
        "code_before",
        "code_after",
        "review_comment",
        "reviewer",
        "created",
    ]

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(edits)
    csv_text = buf.getvalue()
    back = list(csv.reader(io.StringIO(csv_text, newline="")))
    assert back == [header, *edits] and all(len(row) == len(header) for row in back)

    gh_text = json.dumps(comments, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert json.loads(gh_text) == comments
    ref_text = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in refinement)
    assert [json.loads(x) for x in ref_text.splitlines()] == refinement
    assert len({r["id"] for r in refinement}) == len(refinement)

    write_text(HERE / "github_comments.json", gh_text)
    write_text(HERE / "refinement.jsonl", ref_text)
    write_text(HERE / "edits.csv", csv_text)
    # the same rows under the item's own field names: what `editcurate run FILE` reads with
    # no config
    names = ("repo", "change", "path", "before", "after", "comment", "author", "created_at")
    items_text = "".join(
        json.dumps(dict(zip(names, row, strict=True)), ensure_ascii=False) + "\n" for row in edits
    )
    write_text(HERE / "edits.jsonl", items_text)

    with open(HERE / "github_comments.json", encoding="utf-8") as f:
        assert len(json.load(f)) == len(comments)
    with open(HERE / "edits.csv", encoding="utf-8", newline="") as f:
        assert len(list(csv.DictReader(f))) == len(edits)

    print(
        f"github_comments.json: {gh_stats['comments']} comments "
        f"({gh_stats['with_suggestion']} with a suggestion, {gh_stats['suggestion_blocks']} "
        f"suggestion blocks, {gh_stats['no_suggestion']} without, {gh_stats['replies']} "
        f"replies, {gh_stats['bot']} by bots)"
    )
    print(f"refinement.jsonl: {len(refinement)} records")
    print(f"edits.csv: {len(edits)} rows (and edits.jsonl, the same in item field names)")
    total = gh_stats["suggestion_blocks"] + len(refinement) + len(edits)
    print(f"total review items (suggestion blocks + records + rows): {total}")


if __name__ == "__main__":
    main()
