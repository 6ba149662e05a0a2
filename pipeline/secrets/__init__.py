"""Secrets found and masked before the first write: `[REDACTED:<rule>]` keeps the kind.

Precise by default, never silently damaging code: only a high-confidence credential is masked
(and its item dropped by the filter); a guess is never masked, it flags the item instead.
Each rule has a tier (`Rule.tier`):
- HIGH, a credential wherever it is, masked everywhere: private-key blocks (PEM, PGP, PuTTY's
  private lines), provider tokens with their own format or prefix (AWS AKIA..., GitHub
  ghp_/github_pat_, GitLab glpat-, Slack xox., Stripe sk_live_, Google AIza, Hugging Face hf_,
  npm, PyPI, OpenAI, SendGrid ...), AWS secret keys (named, 40 random characters), a docker
  config's `auths` credentials (`password`, `auth`, tokens; not a placeholder).
- SAMPLE, masked outside test fixtures and documentation (`sample_path`): JWTs, literal
  passwords in URLs, the `data:` / `stringData:` values of a `kind: Secret` manifest (not a
  placeholder, a template or a certificate), and a PEM body with neither header nor END line
  (4+ lines of exactly 64 base64 characters: a diff's hunk cut them from their key, or a
  certificate's, which looks the same). In a test or a doc they are examples (jwt.io's token in
  a JWT parser's tests, `https://user:pass@host`, a manifest in a tutorial), neither masked nor
  flagged, so an item whose path is one keeps them: `mask_columns` reads the batch's `path`.
- WEAK, a guess with no format, never masked (`rules()` leaves them out): a credential word
  assigned a literal (`password = "..."`), a high-entropy assigned literal, detect-secrets'
  keyword detectors. `suspects` finds them, for the filter's `weak_secret` rule to flag the
  item with a reason (`password_assignment`, `high_entropy_literal` ...). Not in test fixtures
  or docs, comments or docstrings, not unquoted in source code (an expression), not for
  identifiers, placeholders or examples, versions, alphabets or encrypted CI values.

Rules come from two places:
- the maintained detector set of Yelp's detect-secrets (Apache-2.0, pinned in pyproject): the
  `denylist` regexes of its RegexBasedDetector plugins (AWS, GitHub, GitLab, Slack, Stripe,
  OpenAI, PyPI, npm, Twilio, SendGrid, Azure, Artifactory, Discord, Telegram, basic-auth URLs
  ...), read as data from the installed package (`detectors`); a pattern's first group, when it
  holds 8 or more characters, is the secret (so `://user:[REDACTED]@host` keeps its shape),
  else the whole match (`(ghp|gho)_...` names a prefix), run on to the token's end. Plus
  TOKEN_FORMATS (`rules`), the token formats it lacks (fine-grained GitHub tokens, Google API
  keys, Hugging Face tokens ...), which the filter's `secret` rules name (`{format: <name>}`).
- ours (`rules`): private-key blocks (header, body, to the END line or the end of the text; a
  body and END line whose header was cut off, as in a diff's context), JWTs, `password / secret
  / token / api_key = <literal>` assignments (env, YAML, JSON, code), and high-entropy literals
  in any assignment; a literal may be triple-quoted or cut off at the end of its line. And
  (`encodings`) credential files by their format: docker configs, PuTTY keys, Kubernetes
  Secrets, headless PEM bodies.

Text whose quotes are escaped (`api_key = \\"k9...\\"`, a JSON line's raw text) is also read
with the backslashes before its quotes taken out, so every rule that needs a quote finds it.
A secret in another encoding is read through a view of its text (`encodings`, one level deep,
each view's cost capped), and a hit masks the span it came from: a base64 run that decodes to
printable text is decoded and the HIGH rules run on it (a Kubernetes Secret's `tls.key:
LS0tLS1CRUdJTi...`, a `.dockerconfigjson`: the whole run is masked under the decoded hit's
rule); `\\u0067` / `\\x67` escapes are decoded and string literals joined across `+` or
adjacency (`"ghp_" + "0123..."`: masked with all its parts); for the WEAK rules, an assignment
continued with a backslash-newline is joined (`export PASSWORD=\\` newline `"..."`: flagged).

Not secrets: values that are placeholders as a whole (`${X}`, `{token}`, `<x>`, `%(x)s`, `***`,
`changeme`, `your-api-key-here`, `TODO`), code (a call, an attribute, a subscript), tokenizer
special tokens (`"<|endoftext|>"`), git SHAs and other pure-hex digests, SRI hashes
(`sha512-...`), lock-file digests (`sha256:...`).

Speed: each rule has a prefilter regex (a superset); `mask_columns` runs the prefilters
vectorised over a whole Arrow batch (as Rust regexes that match wherever Python's do:
`rust_superset`) and calls the Python rules only on the rows they flag. A prefilter with a
literal screen (strings one of which each match holds: `github_pat_`, `-----BEGIN`) scans
only the rows that hold one, all screens' strings found in one pass. The views are
triggered the same way (the `encoded` and `continued` rules find nothing themselves: their
prefilters flag the rows where a view may find more; a row they did not flag skips the views).

The modules, each imported by name (this package re-exports nothing):
- rules: the Rule record and its tiers, TOKEN_FORMATS, our own rules, placeholders
- encodings: rules for credential files by their format, and the views of a text (base64
  blobs decoded, escapes decoded, literals joined, continuations joined)
- detectors: detect-secrets' patterns as rules
- places: where a value sits (a test fixture's or a doc's path, source code, a comment)
- rust: a rule's prefilter as the Rust regex polars runs
- screen: a prefilter's literal screen, and the rows of a column that pass the screens
- finding: the rule set in order, the vectorised prefilter scan, `find` and `suspects`
  (WEAK findings, and the filter's per-row column of them)
- masking: `mask`, `mask_head`, `shown`, `mask_columns`
"""
