from datetime import datetime, timezone

from pipeline.config import SourceConfig
from pipeline.ingest.base import Record, RecordError
from pipeline.ingest.mapping import github_repo, map_object, unrepr, url_tail


def spec(**kw) -> SourceConfig:
    return SourceConfig(kind="table", path="x", **kw)


def item(rec):
    assert isinstance(rec, Record), rec
    (it,) = rec.items
    return it


def test_unmapped_fields_read_same_named_input_fields():
    it = item(
        map_object({"before": "a", "after": "b", "repo": "o/r", "lines_added": 3}, spec(), "line 1")
    )
    assert (it.before, it.after, it.repo, it.lines_added) == ("a", "b", "o/r", 3)
    assert it.comment == "" and it.lines_removed is None


def test_mapping_dotted_fields_defaults_and_numbers_as_text():
    s = spec(
        fields={"before": "code.old", "after": "code.new", "author": "user.login", "change": "pr"},
        defaults={"repo": "acme/app"},
    )
    obj = {"code": {"old": "x = 1", "new": "x = 2"}, "user": {"login": "ann"}, "pr": 42}
    it = item(map_object(obj, s, "row 1"))
    assert (it.before, it.after, it.author, it.change, it.repo) == (
        "x = 1",
        "x = 2",
        "ann",
        "42",
        "acme/app",
    )


def test_missing_required_field_names_the_input_field():
    r = map_object({"old": "a"}, spec(fields={"before": "old", "after": "new"}), "line 3")
    assert isinstance(r, RecordError)
    assert r.reason == "missing field: after (input field 'new')" and r.ref == "line 3"
    assert '"old":"a"' in r.raw


def test_wrong_types_are_errors_not_coercions():
    r = map_object({"before": 5, "after": "b"}, spec(), "line 1")
    assert isinstance(r, RecordError) and r.reason.startswith("wrong type: before")
    # an optional number that cannot be read leaves the item an item, the problem named
    r = map_object({"before": "a", "after": "b", "lines_added": "many"}, spec(), "line 1")
    assert isinstance(r, Record) and r.problems == ["lines_added unparseable"]
    r = map_object(["a", "b"], spec(), "line 1")
    assert isinstance(r, RecordError) and r.reason == "not an object: got list"


def test_times_and_bools():
    s = spec()
    base = {"before": "a", "after": "b"}
    t = item(map_object({**base, "created_at": 1700000000}, s, "l")).created_at
    assert t == datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone.utc)
    t = item(map_object({**base, "created_at": "2024-03-05T10:11:12Z"}, s, "l")).created_at
    assert t == datetime(2024, 3, 5, 10, 11, 12, tzinfo=timezone.utc)
    r = map_object({**base, "created_at": "last tuesday"}, s, "l")
    assert item(r).created_at is None and r.problems == ["created_at unparseable"]
    assert item(map_object({**base, "author_is_bot": "true"}, s, "l")).author_is_bot is True


def test_transforms_for_nofuneval_fields():
    # NoFunEval stores commit messages repr'd twice, as read from the shared corpus.
    raw = "'\\\\\"BUGFIX: Recycle views to scroll faster\\\\n\\\\\"'"
    assert unrepr(raw) == "BUGFIX: Recycle views to scroll faster"
    assert unrepr("plain message") == "plain message"
    url = "https://github.com/onyxbits/listmyaps/commit/5065990868de934c2c9aa5dfce01b69b362eb94e"
    assert github_repo(url) == "onyxbits/listmyaps"
    assert url_tail(url) == "5065990868de934c2c9aa5dfce01b69b362eb94e"
    s = spec(
        fields={
            "before": "source_code",
            "after": "target_code",
            "comment": "msg",
            "repo": "commit",
            "change": "commit",
        },
        transforms={"comment": "unrepr", "repo": "github_repo", "change": "url_tail"},
    )
    it = item(
        map_object({"source_code": "a", "target_code": "b", "msg": raw, "commit": url}, s, "line 1")
    )
    assert it.repo == "onyxbits/listmyaps" and it.change.startswith("5065990")
    assert it.comment == "BUGFIX: Recycle views to scroll faster"


# The shapes of NoFunEval `commit_message` whose upstream text was cut short: the repr'd
# message lost its closing `\\"'`, so the quotes open but never close.
TRUNCATED = {
    "'\\\\\"Optimise analog again\\\\n\\\\n- forgot to apply it\\\\nanalog to center": (
        "Optimise analog again\n\n- forgot to apply it\nanalog to center"
    ),
    "'\\\\\"Clear cookies": "Clear cookies",
    "'\\\\\"[detekt] UrlAutoCompleteFilter: Avoid using Kotlin\\'s spread operator": (
        "[detekt] UrlAutoCompleteFilter: Avoid using Kotlin's spread operator"
    ),
    '\'\\\\"speed up repo searchs by using \\\\"depth last\\\\"\\\\n\\\\nRecursively s': (
        'speed up repo searchs by using "depth last"\n\nRecursively s'
    ),
}


def test_unrepr_peels_an_unclosed_repr_layer():
    for raw, want in TRUNCATED.items():
        assert unrepr(raw) == want, raw
        assert unrepr(raw + "\\\\n\\\\\"'") == want  # the same message, not cut short
    # a single repr cut short, and one of a message that starts with a quote
    assert unrepr("'Fix leak\\nin pool") == "Fix leak\nin pool"
    assert unrepr(repr(repr('"x" is y'))[:-3]) == '"x" is y'
    # text that merely starts with a quote is not a repr: its quote stays
    for text in ('"foo" is now bar', "'quoted' word", '"a', "'", '"Revert "x"" again'):
        assert unrepr(text) == text


def test_common_input_names_fill_change_and_created_at():
    """Mined history's `commit` / `timestamp` (and the like) fill change / created_at when
    the source neither has those fields nor maps them."""
    base = {"before": "a", "after": "b"}
    it = item(map_object({**base, "commit": "f23336e", "timestamp": 1700000000}, spec(), "l"))
    assert it.change == "f23336e"
    assert it.created_at == datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone.utc)
    it = item(map_object({**base, "pr_number": 42, "date": "2024-03-05T10:11:12Z"}, spec(), "l"))
    assert it.change == "42" and it.created_at == datetime(
        2024, 3, 5, 10, 11, 12, tzinfo=timezone.utc
    )
    # the item's own name wins; a value the field cannot hold is passed over, not an error
    obj = {**base, "change": "c1", "commit": "x", "pull_request": {"url": "u"}, "created": 5}
    it = item(map_object(obj, spec(), "l"))
    assert it.change == "c1" and it.created_at == datetime(1970, 1, 1, 0, 0, 5, tzinfo=timezone.utc)
    r = map_object({**base, "pull_request": {"url": "u"}, "sha": "abc"}, spec(), "l")
    assert item(r).change == "abc" and r.problems == []
    it = item(map_object({**base, "pull_request": {"url": "u"}}, spec(), "l"))
    assert it.change == "" and it.created_at is None
    # a mapping or a default for the field turns its aliases off
    obj = {**base, "commit": "x", "timestamp": 1, "ref": "r9"}
    it = item(
        map_object(obj, spec(fields={"change": "ref"}, defaults={"created_at": "2020-01-01"}), "l")
    )
    assert it.change == "r9" and it.created_at == datetime(2020, 1, 1, tzinfo=timezone.utc)
