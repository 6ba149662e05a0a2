"""The one prompt template for supervised fine-tuning (export --format sft, and smoke-train).

Keep every consumer on `render`: a model trained on one layout and evaluated on another
measures the template, not the data.

The prompt's sections start at its headers (`HEADERS`, each at the start of a line). A field
is data, and data may hold those words too: a comment quoting "Code after:" on a line of its
own would give the prompt two such headers, and the model no way to tell where the code after
starts. So every line of path, comment, context and before (the first line included) that
starts with a header, after any number of backslashes, gets one more backslash in front:
`Code after:` -> `\\Code after:`, `\\Code after:` -> `\\\\Code after:`. A line counts as any
line break Python's `str.splitlines` knows (\\n, \\r, \\v, \\f, \\x1c-\\x1e, \\x85, \\u2028,
\\u2029), as a tokenizer may. The prompt then has exactly one line starting with each header
(Context only when there is context); the data stays readable, and `unescape_field` gives the
field back exactly (each escaped line loses one backslash). The completion (`after`) is not
escaped: it is what the model learns to write, and nothing follows it in the prompt.
"""

from __future__ import annotations

import re

HEADERS = ("File:", "Review comment:", "Context:", "Code before:", "Code after:")

PROMPT = """\
You are a code reviewer's assistant. Apply the review comment to the code.

File: {path}
Review comment:
{comment}
{context_block}Code before:
{before}
Code after:
"""

_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_HEADS = "|".join(re.escape(h) for h in HEADERS)
# a field's start or a line break, then backslashes (maybe none), then a header
_ESCAPE = re.compile(rf"(^|[{_BREAKS}])(\\*)(?=(?:{_HEADS}))")
_UNESCAPE = re.compile(rf"(^|[{_BREAKS}])\\(\\*)(?=(?:{_HEADS}))")


def escape_field(text: str) -> str:
    """`text` with one more backslash before every line that starts with a header (after
    any backslashes): no line of it can read as one of the prompt's own headers."""
    return _ESCAPE.sub(r"\1\\\2", text)


def unescape_field(text: str) -> str:
    """The inverse of escape_field: the field as the item holds it."""
    return _UNESCAPE.sub(r"\1\2", text)


def render(path: str, comment: str, context: str, before: str, after: str) -> tuple[str, str]:
    """(prompt, completion) for one item: path, comment, optional context, before -> after.

    The completion is the `after` text with a trailing newline, so generation can stop there.
    """
    context_block = f"Context:\n{escape_field(context)}\n" if context else ""
    prompt = PROMPT.format(
        path=escape_field(path),
        comment=escape_field(comment),
        context_block=context_block,
        before=escape_field(before),
    )
    return prompt, after + "\n"
