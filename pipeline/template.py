"""The one prompt template for supervised fine-tuning (export --format sft, and smoke-train).

Keep every consumer on `render`: a model trained on one layout and evaluated on another
measures the template, not the data.
"""

from __future__ import annotations

PROMPT = """\
You are a code reviewer's assistant. Apply the review comment to the code.

File: {path}
Review comment:
{comment}
{context_block}Code before:
{before}
Code after:
"""


def render(path: str, comment: str, context: str, before: str, after: str) -> tuple[str, str]:
    """(prompt, completion) for one item: path, comment, optional context, before -> after.

    The completion is the `after` text with a trailing newline, so generation can stop there.
    """
    context_block = f"Context:\n{context}\n" if context else ""
    prompt = PROMPT.format(path=path, comment=comment, context_block=context_block, before=before)
    return prompt, after + "\n"
