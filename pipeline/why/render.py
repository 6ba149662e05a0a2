"""Text rendering of `explain()` results as Rich `Text` lines: data is never parsed as markup,
and every piece of text goes through `pipeline.console.visible` (one line, control characters
escaped), so a repo, path or query holding an ESC sequence or a newline shows as written."""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text

from pipeline.console import visible
from pipeline.stage import NAMES, SPLITS
from pipeline.why.lookup import MAX_LISTED, MIN_PREFIX, one_line

Part = str | tuple[str, str]

_STATUS_STYLE = {
    "kept": "green",
    "item": "green",
    "train": "green",
    "validation": "green",
    "test": "green",
    "rejected": "red",
    "removed": "red",
    "missing": "bold red",
}


def _j(x: float | None) -> str:
    return "?" if x is None else f"{x:.4f}"


def _add(t: Text, text: object, style: str = "") -> Text:
    """`text` appended to `t` on one line, control characters escaped."""
    return t.append(visible(text, one_line=True), style=style)


def _line(*parts: Part) -> Text:
    """A line from plain strings and (text, style) pairs, each escaped (see _add)."""
    t = Text()
    for p in parts:
        if isinstance(p, tuple):
            _add(t, p[0], p[1])
        else:
            _add(t, p)
    return t


def render(results: list[dict[str, Any]]) -> list[Text]:
    """Human-readable lines, one block per query; ids always whole."""
    out: list[Text] = []
    for k, r in enumerate(results):
        if k:
            out.append(Text())
        out.extend(_render_one(r))
    return out


def _unresolved(r: dict[str, Any]) -> list[Text]:
    q, status, m = r["query"], r["status"], r["matches"]
    if status == "unknown":
        label, why = "unknown id", f": in no stage of {r['run']}"
    elif status == "too_short":
        label = "unknown id"
        why = f": no id is exactly this; a prefix needs at least {MIN_PREFIX} characters"
    else:
        label, why = "ambiguous prefix", f": matches {len(m)} ids; give more characters"
    lines = [_line((q, "bold"), "  ", (label, "bold red"), why)]
    if status == "ambiguous":
        lines += [_line("  ", i) for i in m[:MAX_LISTED]]
        if len(m) > MAX_LISTED:
            lines.append(_line(f"  ... and {len(m) - MAX_LISTED} more"))
    return lines


def _render_one(r: dict[str, Any]) -> list[Text]:
    if r["status"] != "found":
        return _unresolved(r)
    it = r.get("item", {})
    head = _line(("id ", "bold"), (r["id"], "bold cyan"))
    if r["query"].strip().lower() != r["id"]:
        _add(head, f"  (from prefix {r['query']})", "dim")
    lines = [head]
    if it:
        lines.append(_line("  repo   ", it.get("repo") or "", "   change ", it.get("change") or ""))
        lang = f"  ({it['language']})" if it.get("language") else ""
        lines.append(_line("  path   ", it.get("path") or "", lang))
        for c in ("comment", "before", "after"):
            n = it.get(f"{c}_lines") or 1
            t = _line(f"  {c:<7} ", ("│ ", "dim"), it.get(c) or ("(empty)", "dim"))
            if n > 1:
                _add(t, f"  ({n} lines)", "dim")
            lines.append(t)
    rows = r.get("rows", [])
    # Rows with the same decisions (exact duplicates removed alike) are shown once.
    same: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        same.setdefault(json.dumps([row["stages"], row["outcome"]], default=str), []).append(row)
    for group in same.values():
        refs = ", ".join(f"{x['source']} {x['source_ref']}" for x in group)
        n = "row" if len(rows) == 1 else f"{len(group)} of {len(rows)} rows"
        lines.append(
            _line((f"  {n}", "bold"), f" from {refs}", (f"  -> {group[0]['outcome']}", "bold"))
        )
        for st in NAMES:
            if st in group[0]["stages"]:  # decontaminate: only where the run has it
                lines.append(_line(f"    {st:<7} ", *_stage_text(st, group[0]["stages"][st])))
                if st == "dedup":
                    lines += _keeper_lines(it, group[0]["stages"][st])
    reached = {
        st for row in rows for st, d in row["stages"].items() if d["status"] != "not reached"
    }
    if "dedup" in reached:
        lines += _render_dedup(r.get("dedup", {}))
    if "shapes" in reached:
        lines += _render_shapes(r.get("shapes", {}))
    return lines


def _stage_text(st: str, d: dict[str, Any]) -> list[Part]:
    s = d["status"]
    style = _STATUS_STYLE.get(s, "dim")
    if s == "not reached":
        return [(f"not reached (stopped at {d['stopped_at']})", "dim")]
    if s in ("not run", "unfinished", "stale"):
        say = {"unfinished": " (no manifest)", "stale": " (its inputs changed after it ran)"}
        return [(f"stage {s}" + say.get(s, ""), "yellow")]
    if s == "missing":
        return [("missing", style), f": {d['note']}"]
    parts: list[Part] = [(s, style)]
    if st == "filter":
        if s == "rejected":
            parts += [" by rule ", (str(d.get("rule")), "bold"), ": ", str(d.get("reason") or "")]
            others = [x for x in d.get("rules") or [] if x != d.get("rule")]
            if others:
                parts.append(f" (also matched: {', '.join(others)})")
        if d.get("flags"):
            parts.append(f"  flags: {', '.join(d['flags'])}")
    elif st == "dedup" and s == "removed":
        parts += [
            f": {d.get('kind')} duplicate of ",
            (str(d.get("keeper_id")), "cyan"),
            f" (exact J {_j(d.get('j'))})",
        ]
    elif st == "decontaminate" and s == "removed":
        parts += [
            f": {d.get('kind')} of benchmark item ",
            (f"{d.get('benchmark_source')} {d.get('benchmark_ref')}", "cyan"),
            f" (exact J {_j(d.get('j'))})",
        ]
    elif st == "shapes":
        if s == "removed":
            parts += [
                f": {d.get('reason')} at scope {d.get('scope')}, group {d.get('group_id')}, "
                "keeper ",
                (str(d.get("keeper_id")), "cyan"),
            ]
        if d.get("batch_order") is not None:
            parts.append(f"  batch_order {d['batch_order']}")
    elif st == "export" and s in SPLITS:
        size = d.get("export_group_size")
        n = "" if size is None else f", {size} item" + ("s" if size != 1 else "")
        parts.append(f": export group {d.get('export_group')}{n}")
    return parts


KEEPER_INDENT = " " * 12  # under the stage's text


def _keeper_lines(it: dict[str, Any], d: dict[str, Any]) -> list[Text]:
    """A dedup-removed row: its keeper's comment, before and after, each beside the item's."""
    if d.get("keeper_note"):
        return [_line(KEEPER_INDENT, (d["keeper_note"], "dim"))]
    k = d.get("keeper")
    if not k:
        return []
    where = f"{k.get('repo') or ''}  {k.get('path') or ''}".strip()
    lines = [_line(KEEPER_INDENT, ("keeper  ", "bold"), (str(k.get("id")), "cyan"), f"  {where}")]
    for c in ("comment", "before", "after"):
        for who, src, style in (("item  ", it, ""), ("keeper", k, "cyan")):
            label = f"{c:<7} " if who == "item  " else " " * 8
            t = _line(KEEPER_INDENT, label, (who, style), (" │ ", "dim"))
            _add(t, src.get(c) or "(empty)", "" if src.get(c) else "dim")
            n = src.get(f"{c}_lines") or 1
            if n > 1:
                _add(t, f"  ({n} lines)", "dim")
            lines.append(t)
    return lines


def _render_dedup(d: dict[str, Any]) -> list[Text]:
    if d.get("stage") != "done":
        return []
    c = d.get("cluster")
    if not c:
        lines = [_line("  dedup cluster: none (no duplicate at the threshold)")]
    else:
        comp = f", component {c['component_id']}" if c.get("component_id") is not None else ""
        lines = [
            _line(
                f"  dedup cluster {c['cluster_id']}: {c['size']} rows{comp}, keeper ",
                (str(c["keeper_id"]), "cyan"),
            )
        ]
        for m in c["members"]:
            n = f"  x{m['rows']} rows" if m.get("rows", 1) > 1 else ""
            lines.append(_line("    ", m["id"], f"  {m['kind']}  J {_j(m['j_to_keeper'])}{n}"))
        if c["members_not_listed"]:
            lines.append(_line(f"    ... and {c['members_not_listed']} more"))
    near = d.get("near_pairs") or {}
    if near.get("outside"):
        thr = near.get("threshold")
        lines.append(_line(f"  verified pairs outside its cluster (threshold {thr}):"))
        for p in near["outside"]:
            other = p.get("change_j", 1.0) < (near.get("change_threshold") or 0.0)
            why = f"  change J {_j(p.get('change_j', 1.0))}" + (
                "  (another change)" if other else ""
            )
            lines.append(_line("    ", p["other"], f"  exact J {_j(p['exact_j'])}{why}"))
        if near.get("outside_not_listed"):
            lines.append(_line(f"    ... and {near['outside_not_listed']} more"))
    return lines


def _render_shapes(s: dict[str, Any]) -> list[Text]:
    if s.get("stage") != "done" or not s.get("groups"):
        return []
    g0 = s["groups"][0]
    lines = [
        _line(
            "  shape   ",
            ("│ ", "dim"),
            one_line(g0["shape_text"]),
            ("  (digit-only)", "dim") if g0["digit_only"] else "",
        ),
        _line(f"  shape groups (policy {s.get('policy')}, scope {s.get('scope')}):"),
    ]
    for g in s["groups"]:
        t = _line(f"    {g['scope']:<7} group {g['group_id']}, key {g['shape_key']}, ")
        _add(t, f"size {g['group_size']}", "bold" if g["group_size"] > 1 else "")
        if g.get("policy_scope"):
            if s.get("policy") != "cap":
                _add(t, f"; not capped (policy {s.get('policy')})")
            elif g.get("cap") is None:
                _add(t, "; not capped (nothing removed from this group)")
            else:
                how = "from the manifest" if g["cap_from"] == "manifest" else "size - removed"
                over = "over the cap" if g["over_cap"] else "within the cap"
                _add(
                    t,
                    f"; cap {g['cap']} ({how}): {over}, "
                    f"{g['removed_in_group']} removed from the group",
                )
        lines.append(t)
        if g["group_size"] > 1:
            more = f" and {g['members_not_listed']} more" if g["members_not_listed"] else ""
            lines.append(_line("      members ", ", ".join(g["members"]), more))
    return lines
