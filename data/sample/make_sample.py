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

PY_A, PY_B, PY_C, PY_D = (
    "openmeadow/meadow-etl",
    "tidewater-io/harbor",
    "quantcraft/qc-backtest",
    "lhartmann/dotsync",
)
JS_A, JS_B, JS_C = "brightpath/checkout-web", "kitepaper/kite-ui", "nodewright/queuey"
GO_A, GO_B, GO_C = "stratalink/strata", "gopherworks/rtail", "vantage-ops/vops-agent"
RS_A, RS_B = "ironquill/quill-fmt", "saltmarsh/tidepool-rs"
JV_A, JV_B = "acmefin/ledger-service", "orchard-oss/orchard-scheduler"

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


def rabbit(kind: str, title: str, why: str) -> str:
    return (
        f"_{kind}_\n\n**{title}**\n\n{why}\n\n<details>\n<summary>📝 Committable suggestion"
        "</summary>\n\n> ‼️ **IMPORTANT**\n> Check this suggestion against the surrounding "
        "code before committing it.\n\n@S@\n\n</details>\n\n"
        "<!-- This is an auto-generated comment by CodeRabbit -->"
    )


REVIEWDOG = (
    "<sub>reported by [reviewdog](https://github.com/reviewdog/reviewdog) :dog:</sub><br>"
    "@lead@\n\n@S@"
)

# fmt: off
TEMPLATES: list[T] = [
    # ---------------------------------------------------------------- python
    T(PY_A, "@path@", """\
 def @fn@(@args@):
     rows = @rows@
-    msg = "Loaded %d @what@ from %s" % (len(rows), @src@)
+    msg = "Loaded {} @what@ from {}".format(len(rows), @src@)""",
      '    msg = f"Loaded {len(rows)} @what@ from {@src@}"', "@lead@",
      variants=(
          {"repo": PY_A, "path": "src/meadow_etl/loaders/csv_loader.py", "fn": "load_csv",
           "args": 'path, *, delimiter=","', "rows": "list(_read_rows(path, delimiter))",
           "what": "rows", "src": "path", "lead": "use an f-string"},
          {"repo": PY_B, "path": "harbor/ingest/parquet.py", "fn": "read_parquet",
           "args": "source", "rows": "pq.read_table(source).to_pylist()", "what": "rows",
           "src": "source", "lead": "nit: f-string"},
          {"repo": PY_C, "path": "qc_backtest/data/feed.py", "fn": "load_feed",
           "args": "feed_path", "rows": "_parse_bars(feed_path)", "what": "bars",
           "src": "feed_path", "lead": "Could be an f-string"},
          {"repo": PY_D, "path": "dotsync/manifest.py", "fn": "load_csv",
           "args": 'path, *, delimiter=","', "rows": "list(_read_rows(path, delimiter))",
           "what": "rows", "src": "path", "lead": "f-string here too?"},
      )),
    T(PY_B, "harbor/transport/socket.py", '''\
     def wait_for_ack(self, timeout: float = 5.0) -> bytes:
+        """Block until we recieve the ack frame or the timeout expires."""''',
      '        """Block until we receive the ack frame or the timeout expires."""', "typo"),
    T(PY_A, "src/meadow_etl/settings.py", """\

+def merge_settings(base, overrides={}):
+    result = dict(base)""",
      "def merge_settings(base, overrides=None):\n    overrides = overrides or {}\n"
      "    result = dict(base)",
      span=2, user="coderabbitai[bot]",
      body=rabbit("⚠️ Potential issue", "Avoid a mutable default argument.",
                  "The `{}` default is created once and shared by every call, so a caller "
                  "that mutates `overrides` changes the default for all later calls.")),
    T(PY_C, "@path@", """\
     @ctx@
+    if @var@ == None:""",
      "    if @var@ is None:", "@lead@",
      variants=(
          {"repo": PY_C, "path": "qc_backtest/engine/broker.py",
           "ctx": "order = self._pending.get(order_id)", "var": "order",
           "lead": "`is None` here (E711)"},
          {"repo": PY_D, "path": "dotsync/config.py", "ctx": "home = os.environ.get(\"HOME\")",
           "var": "home", "lead": "comparison to None should be `is None`"},
      )),
    T(PY_A, "@path@", """\
 def @fn@(@p@):
+    f = open(@p@)
+    data = f.read()
+    f.close()""",
      '    with open(@p@, encoding="utf-8") as f:\n        data = f.read()',
      "Use a context manager so the file is closed even if `read()` raises.", span=3,
      variants=(
          {"repo": PY_A, "path": "src/meadow_etl/sql.py", "fn": "read_query", "p": "path"},
          {"repo": PY_D, "path": "dotsync/templates.py", "fn": "load_template",
           "p": "template_path"},
      )),
    T(PY_B, "@path@", """\
     try:
         @call@
+    except:
+        pass""",
      '    except @exc@:\n        logger.debug("ignoring failed @what@", exc_info=True)',
      "Please don't swallow everything here, a bare except also catches KeyboardInterrupt.",
      span=2,
      variants=(
          {"repo": PY_B, "path": "harbor/metrics.py", "call": "self._statsd.flush()",
           "exc": "OSError", "what": "metrics flush"},
          {"repo": PY_C, "path": "qc_backtest/cache.py", "call": "os.remove(self._lock_path)",
           "exc": "FileNotFoundError", "what": "lock cleanup"},
      )),
    T(PY_C, "qc_backtest/engine/portfolio.py", """\
     def rebalance(self, weights):
         trades = self._diff(weights)
+        print("DEBUG trades", trades)""",
      "", "leftover debug print?"),
    T(PY_A, "@path@", """\

+    if "@k@" in @d@:
+        @v@ = @d@["@k@"]
+    else:
+        @v@ = @default@""",
      '    @v@ = @d@.get("@k@", @default@)', "This can be a single `.get()`", span=4,
      variants=(
          {"repo": PY_A, "path": "src/meadow_etl/pipeline.py", "k": "batch_size",
           "d": "options", "v": "batch_size", "default": "1000"},
          {"repo": PY_B, "path": "harbor/config.py", "k": "region", "d": "env",
           "v": "region", "default": '"eu-west-1"'},
      )),
    T(PY_D, "@path@", """\
 def @fn@(@xs@):
+    @out@ = []
+    for @x@ in @xs@:
+        @out@.append(@expr@)""",
      "    @out@ = [@expr@ for @x@ in @xs@]", "@lead@", span=3,
      variants=(
          {"repo": PY_D, "path": "dotsync/paths.py", "fn": "expand_all", "xs": "paths",
           "out": "expanded", "x": "p", "expr": "os.path.expanduser(p)",
           "lead": "list comprehension?"},
          {"repo": PY_B, "path": "harbor/routing.py", "fn": "normalise_hosts", "xs": "hosts",
           "out": "result", "x": "h", "expr": "h.strip().lower()",
           "lead": "Could be a comprehension"},
      )),
    T(PY_C, "qc_backtest/signals/momentum.py", """\
 def lookback_returns(closes, window):
+    returns = []
+    for i in range(window, len(closes)):
+        returns.append(closes[i] / closes[i - window] - 1)""",
      "    returns = [closes[i] / closes[i - window] - 1 for i in range(window, len(closes))]",
      "**suggestion (code-quality):** Convert for loop into list comprehension "
      "(`list-comprehension`)", span=3, user="sourcery-ai[bot]"),
    T(PY_D, "dotsync/render.py", """\
 from pathlib import Path


 def template_dir():
+    base = os.path.join(os.path.dirname(__file__), "templates")""",
      '    base = Path(__file__).parent / "templates"',
      "We already import Path at the top, could use it here.", section="import os"),
    T(PY_B, "@path@", """\


+def @fn@(@arg@: int) -> @typ@:""",
      "def @fn@(@arg@: int) -> @typ@ | None:",
      "This returns None when nothing matches, so the annotation should say so.",
      variants=(
          {"repo": PY_B, "path": "harbor/users.py", "fn": "find_user", "arg": "user_id",
           "typ": "User"},
          {"repo": PY_C, "path": "qc_backtest/engine/orders.py", "fn": "find_order",
           "arg": "order_id", "typ": "Order"},
      )),
    T(PY_A, "@path@", """\
     headers = {"Authorization": f"Bearer {token}"}
+    resp = requests.@m@(@url@, headers=headers)""",
      "    resp = requests.@m@(@url@, headers=headers, timeout=30)",
      "Please always pass a timeout, otherwise this can hang forever.",
      variants=(
          {"repo": PY_A, "path": "src/meadow_etl/sources/http.py", "m": "get", "url": "url"},
          {"repo": PY_D, "path": "dotsync/remote.py", "m": "post", "url": "self.endpoint"},
      )),
    T(PY_B, "harbor/storage/s3.py", """\
         self._client.upload_file(str(path), bucket, key)
+        logger.info(f"Uploaded {key} to {bucket}")""",
      '        logger.info("Uploaded %s to %s", key, bucket)',
      "[ruff] G004 Logging statement uses f-string", body=REVIEWDOG,
      user="github-actions[bot]"),
    T(PY_C, "@path@", """\
 def @fn@(@xs@):
+    for i in range(len(@xs@)):
+        @x@ = @xs@[i]""",
      "    for i, @x@ in enumerate(@xs@):", "`enumerate` reads better here", span=2,
      variants=(
          {"repo": PY_C, "path": "qc_backtest/report.py", "fn": "print_trades",
           "xs": "trades", "x": "trade"},
          {"repo": PY_A, "path": "src/meadow_etl/validate.py", "fn": "check_columns",
           "xs": "columns", "x": "col"},
      )),
    T(PY_D, "tests/test_duration.py", """\
 from dotsync.duration import parse_duration


+def test_parse_duration():
+    assert parse_duration("5s") == 5
+    assert parse_duration("2m") == 120
+    assert parse_duration("1h") == 3600""",
      '@pytest.mark.parametrize(\n    ("text", "seconds"),\n'
      '    [("5s", 5), ("2m", 120), ("1h", 3600)],\n)\n'
      "def test_parse_duration(text, seconds):\n    assert parse_duration(text) == seconds",
      "parametrize so a failure tells you which case broke (needs `import pytest`)", span=4),
    T(PY_A, "@path@", """\
     try:
         return self._values[key]
     except KeyError:
+        raise @err@(f"missing key {key!r}")""",
      '        raise @err@(f"missing key {key!r}") from None',
      "`from None` so the traceback doesn't show the KeyError as well",
      variants=(
          {"repo": PY_A, "path": "src/meadow_etl/context.py", "err": "ConfigError"},
          {"repo": PY_B, "path": "harbor/registry.py", "err": "LookupError"},
      )),
    T(PY_B, "harbor/db.py", """\
     def close(self):
+        if self._conn != None:
+            self._conn.close()""",
      None, span=2,
      body="Two options:\n"
           + block("        if self._conn is not None:\n            self._conn.close()")
           + "\nor, if we want close() to be safe to call twice:\n"
           + block("        if self._conn is not None:\n            self._conn.close()\n"
                   "            self._conn = None")),
    # ---------------------------------------------------------------- js / ts
    T(JS_C, "@path@", """\
 async function @fn@(argv) {
+  let @v@ = @init@;""",
      "  const @v@ = @init@;", "`@v@` is never reassigned",
      variants=(
          {"repo": JS_C, "path": "bin/queuey.js", "fn": "main", "v": "config",
           "init": "loadConfig(argv)"},
          {"repo": JS_A, "path": "scripts/build-sitemap.ts", "fn": "run", "v": "routes",
           "init": "await collectRoutes(argv.root)"},
      )),
    T(JS_A, "@path@", """\
   const res = await fetch(@url@);
+  if (res.status == @code@) {""",
      "  if (res.status === @code@) {", "`===` please",
      variants=(
          {"repo": JS_A, "path": "src/api/orders.ts", "url": "`/api/orders/${id}`",
           "code": "404"},
          {"repo": JS_C, "path": "lib/webhook.js", "url": "hook.url", "code": "200"},
      )),
    T(JS_A, "@path@", """\
 export function @fn@(@obj@) {
+  const @v@ = @obj@ && @obj@.@a@ && @obj@.@a@.@b@;""",
      "  const @v@ = @obj@?.@a@?.@b@;", "optional chaining reads better here",
      variants=(
          {"repo": JS_A, "path": "src/checkout/shipping.ts", "fn": "shippingCity",
           "obj": "user", "v": "city", "a": "address", "b": "city"},
          {"repo": JS_B, "path": "src/theme/resolve.ts", "fn": "accentColor",
           "obj": "theme", "v": "accent", "a": "palette", "b": "accent"},
      )),
    T(JS_C, "lib/connection.js", """\
   socket.end(frame);
+  // recieve the ack before closing the socket""",
      "  // receive the ack before closing the socket", "nit: typo"),
    T(JS_A, "src/hooks/useProducts.js", """\
   useEffect(() => {
+    fetch(url).then((r) => r.json()).then(setData);""",
      "    fetch(url)\n      .then((r) => r.json())\n      .then(setData)\n"
      "      .catch((err) => setError(err));",
      "This needs a catch, otherwise a failed request is an unhandled rejection."),
    T(JS_B, "@path@", """\

+export function @fn@(value: any): string {""",
      "export function @fn@(value: @typ@): string {", "Can we avoid `any` here?",
      variants=(
          {"repo": JS_B, "path": "src/format/price.ts", "fn": "formatPrice", "typ": "number"},
          {"repo": JS_A, "path": "src/utils/date.ts", "fn": "formatDate",
           "typ": "Date | string"},
      )),
    T(JS_A, "@path@", """\
       <ul className="@cls@">
+        {@xs@.map((@x@) => <@C@ @x@={@x@} />)}""",
      "        {@xs@.map((@x@) => <@C@ key={@x@.id} @x@={@x@} />)}",
      "missing `key`, React will warn about this",
      variants=(
          {"repo": JS_A, "path": "src/cart/CartList.tsx", "cls": "cart-items", "xs": "items",
           "x": "item", "C": "CartRow"},
          {"repo": JS_B, "path": "src/components/Menu.tsx", "cls": "kite-menu",
           "xs": "options", "x": "option", "C": "MenuItem"},
      )),
    T(JS_A, "src/account/OrderHistory.tsx", """\
   const [orders, setOrders] = useState<Order[]>([]);
+  useEffect(() => {
+    loadOrders(customerId).then(setOrders);
+  }, []);""",
      "  }, [customerId]);", "This should re-run when `customerId` changes."),
    T(JS_C, "@path@", """\
 function @fn@(@id@) {
+  const url = @base@ + "@route@" + @id@;""",
      "  const url = `${@base@}@route@${@id@}`;", "template literal?",
      variants=(
          {"repo": JS_C, "path": "lib/client.js", "fn": "jobUrl", "id": "jobId",
           "base": "this.baseUrl", "route": "/api/v1/jobs/"},
          {"repo": JS_A, "path": "src/api/client.ts", "fn": "orderUrl", "id": "orderId",
           "base": "API_BASE", "route": "/orders/"},
      )),
    T(JS_C, "lib/producer.js", """\
   const payload = encode(job);
+  console.log("payload", payload);""",
      '  logger.debug({ payload }, "sending payload");',
      "Please use the logger, console output ends up in the worker's stdout"),
    T(JS_B, "src/auth/roles.ts", """\
 export function canEdit(role: Role): boolean {
+  if (EDITOR_ROLES.indexOf(role) !== -1) {""",
      "  if (EDITOR_ROLES.includes(role)) {", "nit: `includes`"),
    T(JS_B, "tsconfig.json", """\
     "target": "ES2020",
     "module": "ESNext",
+    "strict": false,""",
      '    "strict": true,',
      "Can we keep strict on? I'd rather fix the handful of errors than lose it."),
    T(JS_B, "src/models/user.ts", """\
   createdAt: Date;
+  deletedAt: Date | undefined;""",
      "  deletedAt?: Date;", "an optional property is nicer for callers"),
    T(JS_C, "lib/batch.js", """\
 async function fetchAll(ids) {
+  const results = [];
+  for (const id of ids) {
+    results.push(await fetchItem(id));
+  }""",
      "  const results = await Promise.all(ids.map((id) => fetchItem(id)));",
      "These are independent, no need to await them one by one.", span=4),
    T(JS_A, "src/server/auth.ts", """\
 export function requireUser(req: Request, res: Response, next: NextFunction) {
+  const token = req.headers.authorization.split(" ")[1];""",
      '  const header = req.headers.authorization;\n  if (!header?.startsWith("Bearer ")) {\n'
      '    return res.status(401).json({ error: "missing bearer token" });\n  }\n'
      '  const token = header.slice("Bearer ".length);',
      user="coderabbitai[bot]",
      body=rabbit("⚠️ Potential issue", "Guard against a missing Authorization header.",
                  "`req.headers.authorization` is undefined for anonymous requests, so "
                  "`.split` throws and the request fails with a 500 instead of a 401.")),
    T(JS_C, "lib/http/routes.js", """\
 router.get("/jobs", async (req, res) => {
+  const page = parseInt(req.query.page);""",
      "  const page = Number.parseInt(req.query.page, 10);", "always pass the radix"),
    # ---------------------------------------------------------------- go
    T(GO_A, "@path@", """\
 func @fn@(path string) (*@typ@, error) {
     @open@
     if err != nil {
-        return nil, err
+        return nil, fmt.Errorf("@what@: %v", err)""",
      '        return nil, fmt.Errorf("@what@: %w", err)', "@lead@", tabs=True,
      variants=(
          {"repo": GO_A, "path": "internal/config/load.go", "fn": "LoadConfig",
           "typ": "Config", "open": "data, err := os.ReadFile(path)", "what": "read config",
           "lead": "`%w` so callers can still `errors.Is` the underlying error"},
          {"repo": GO_B, "path": "tail/open.go", "fn": "openTail", "typ": "Tailer",
           "open": "f, err := os.Open(path)", "what": "open log file",
           "lead": "nit: wrap with %w"},
          {"repo": GO_C, "path": "pkg/policy/policy.go", "fn": "loadPolicy", "typ": "Policy",
           "open": "raw, err := os.ReadFile(path)", "what": "read policy",
           "lead": "%w instead of %v"},
      )),
    T(GO_B, "@path@", """\
 func @fn@(path string) ([]@typ@, error) {
+    f, err := os.Open(path)
+    if err != nil {
+        return nil, err
+    }""",
      "    }\n    defer f.Close()",
      "missing `defer f.Close()`, this leaks a file descriptor per call", tabs=True,
      variants=(
          {"repo": GO_B, "path": "tail/index.go", "fn": "readIndex", "typ": "Offset"},
          {"repo": GO_C, "path": "pkg/inventory/hosts.go", "fn": "readHosts", "typ": "Host"},
      )),
    T(GO_B, "@path@", """\
     for {
         @rec@, err := @reader@.@read@()
+        if err == io.EOF {""",
      "        if errors.Is(err, io.EOF) {", "`errors.Is`, the reader may wrap EOF", tabs=True,
      variants=(
          {"repo": GO_B, "path": "tail/scan.go", "rec": "line", "reader": "r",
           "read": "ReadLine"},
          {"repo": GO_A, "path": "internal/wal/replay.go", "rec": "entry", "reader": "dec",
           "read": "Next"},
      )),
    T(GO_C, "@path@", """\
 func (c *Client) @fn@(ctx context.Context, @arg@ string) (*@typ@, error) {
     url := c.baseURL + "@route@" + @arg@
+    req, err := http.NewRequest(http.MethodGet, url, nil)""",
      "    req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)",
      "We take a ctx but never use it; pass it down so cancellation works.", tabs=True,
      variants=(
          {"repo": GO_C, "path": "pkg/api/client.go", "fn": "GetAgent", "arg": "id",
           "typ": "Agent", "route": "/v1/agents/"},
          {"repo": GO_A, "path": "client/nodes.go", "fn": "Node", "arg": "name",
           "typ": "NodeInfo", "route": "/nodes/"},
      )),
    T(GO_A, "internal/users/filter.go", """\
 func activeNames(users []User) []string {
+    var names []string""",
      "    names := make([]string, 0, len(users))", "we know the upper bound, preallocate",
      tabs=True),
    T(GO_C, "@path@", """\
     w.Header().Set("Content-Type", "application/json")
+    json.NewEncoder(w).Encode(@resp@)""",
      '    if err := json.NewEncoder(w).Encode(@resp@); err != nil {\n'
      '        log.Printf("encode @what@: %v", err)\n    }',
      "the error from Encode is dropped", tabs=True,
      variants=(
          {"repo": GO_C, "path": "pkg/api/handlers.go", "resp": "status",
           "what": "status"},
          {"repo": GO_A, "path": "internal/http/health.go", "resp": "report",
           "what": "health report"},
      )),
    T(GO_A, "internal/cache/cache.go", """\
 func (c *Cache) Get(key string) ([]byte, bool) {
+    c.mu.Lock()
+    v, ok := c.items[key]
+    c.mu.Unlock()""",
      "    c.mu.RLock()\n    v, ok := c.items[key]\n    c.mu.RUnlock()",
      "This is read-only and `mu` is already a `sync.RWMutex`, an RLock is enough.",
      span=3, tabs=True),
    T(GO_B, "tail/follow.go", """\
 }

+// recieve blocks until a line arrives or ctx is done.""",
      "// receive blocks until a line arrives or ctx is done.", "typo", tabs=True),
    T(GO_C, "@path@", """\
     client := &http.Client{
+        Timeout: @n@,""",
      "        Timeout: @n@ * time.Second,",
      "This is @n@ns as written, `Timeout` is a `time.Duration`.", tabs=True,
      variants=(
          {"repo": GO_C, "path": "pkg/api/client.go", "n": "30"},
          {"repo": GO_B, "path": "ship/http.go", "n": "10"},
      )),
    T(GO_A, "internal/auth/token.go", """\
     if !strings.HasPrefix(header, "Bearer ") {
+        return "", errors.New("Invalid token")""",
      '        return "", errors.New("invalid token")',
      "error strings should not be capitalized (ST1005)", tabs=True),
    T(GO_C, "pkg/billing/total.go", """\
     total := 0
+    for i := 0; i < len(items); i++ {
+        total += items[i].Price""",
      "    for _, item := range items {\n        total += item.Price", "range loop?", span=2,
      tabs=True),
    # ---------------------------------------------------------------- rust
    T(RS_A, "@path@", """\
 @fnline@
+    let @v@ = fs::read_to_string(&@p@).unwrap();""",
      "    let @v@ = fs::read_to_string(&@p@)?;",
      "We return a Result already, no need to panic here.",
      variants=(
          {"repo": RS_A, "path": "src/config.rs",
           "fnline": "pub fn load(path: &Path) -> Result<Config, Error> {", "v": "cfg",
           "p": "path"},
          {"repo": RS_B, "path": "src/snapshot.rs",
           "fnline": "fn read_manifest(dir: &Path) -> io::Result<Manifest> {", "v": "text",
           "p": "dir.join(\"MANIFEST\")"},
      )),
    T(RS_A, "@path@", """\

+pub fn @fn@(@arg@: &String) -> String {""",
      "pub fn @fn@(@arg@: &str) -> String {", "`&str` is more flexible for callers",
      variants=(
          {"repo": RS_A, "path": "src/ident.rs", "fn": "normalize", "arg": "name"},
          {"repo": RS_B, "path": "src/keys.rs", "fn": "shard_key", "arg": "key"},
      )),
    T(RS_B, "src/pool.rs", """\
     let count = self.workers.iter().filter(|w| w.is_idle()).count();
+    return Ok(count);""",
      "    Ok(count)", "**clippy** `needless_return`: unneeded `return` statement",
      user="github-actions[bot]"),
    T(RS_B, "src/server.rs", """\
     let addr: SocketAddr = format!("{}:{}", host, port)
         .parse()
+        .unwrap();""",
      '        .expect("listener address is valid");',
      "If we keep the panic, at least say why"),
    T(RS_A, "src/lines.rs", """\
 fn trimmed_lines(input: &str) -> Vec<String> {
+    let mut out = Vec::new();
+    for line in input.lines() {
+        out.push(line.trim().to_string());
+    }""",
      "    let out: Vec<String> = input.lines().map(|l| l.trim().to_string()).collect();",
      "iterator version", span=4),
    T(RS_A, "src/token.rs", """\

+#[derive(Debug, Clone)]""",
      "#[derive(Debug, Clone, PartialEq, Eq)]",
      "the tests compare these with `assert_eq!`, so they need PartialEq"),
    T(RS_B, "src/cache.rs", """\
     pub fn get(&self, key: &str) -> Option<Bytes> {
+        match self.entries.get(key) {
+            Some(v) => return Some(v.clone()),
+            None => {}
+        }""",
      "        if let Some(v) = self.entries.get(key) {\n            return Some(v.clone());\n"
      "        }",
      "`if let` is simpler here", span=4),
    T(RS_B, "Cargo.toml", """\
 [dependencies]
+tokio = { version = "1", features = ["full"] }""",
      'tokio = { version = "1", features = ["rt-multi-thread", "macros", "net", "time"] }',
      "We only need a handful of these, `full` pulls in a lot."),
    T(RS_A, "@path@", """\
     @pre@
+    println!("{} @what@", @v@);""",
      '    println!("{@v@} @what@");', "inline the format arg (clippy::uninlined_format_args)",
      variants=(
          {"repo": RS_A, "path": "src/main.rs", "pre": "let count = fmt_all(&files)?;",
           "what": "files formatted", "v": "count"},
          {"repo": RS_B, "path": "src/bin/tidepool.rs", "pre": "let n = pool.drain().await;",
           "what": "tasks drained", "v": "n"},
      )),
    T(RS_B, "src/quota.rs", """\
     let used = self.used.load(Ordering::Relaxed);
+    let remaining = limit - used;""",
      "    let remaining = limit.saturating_sub(used);",
      "this underflows (and panics in debug builds) when used > limit"),
    T(RS_A, "src/cli.rs", """\
 fn profile_name(opt: &Opts) -> &str {
+    opt.name.as_ref().map(|s| s.as_str()).unwrap_or("default")""",
      '    opt.name.as_deref().unwrap_or("default")', "`as_deref()`"),
    # ---------------------------------------------------------------- java
    T(JV_A, "src/main/java/com/acmefin/ledger/io/CsvImporter.java", """\
     public Header readHeader(File file) throws IOException {
+        BufferedReader reader = new BufferedReader(new FileReader(file));
+        String header = reader.readLine();
+        reader.close();""",
      "        String header;\n"
      "        try (BufferedReader reader = Files.newBufferedReader(file.toPath())) {\n"
      "            header = reader.readLine();\n        }",
      "try-with-resources, otherwise the reader leaks when readLine throws", span=3),
    T(JV_A, "@path@", """\
     public boolean @fn@(@cls@ @obj@) {
         String status = @obj@.getStatus();
+        if (status == "@val@") {""",
      '        if ("@val@".equals(status)) {', "`==` compares references for strings",
      variants=(
          {"repo": JV_A, "path": "src/main/java/com/acmefin/ledger/AccountService.java",
           "fn": "isActive", "cls": "Account", "obj": "account", "val": "ACTIVE"},
          {"repo": JV_B, "path": "src/main/java/org/orchard/scheduler/JobFilter.java",
           "fn": "isRunnable", "cls": "Job", "obj": "job", "val": "QUEUED"},
      )),
    T(JV_A, "@path@", """\
     public @typ@ @fn@(@idt@ id) {
+        return @repo_@.findById(id).get();""",
      "        return @repo_@.findById(id).orElseThrow(() -> new @exc@(id));",
      "`get()` throws a bare NoSuchElementException; callers expect @exc@",
      variants=(
          {"repo": JV_A, "path": "src/main/java/com/acmefin/ledger/AccountService.java",
           "typ": "Account", "fn": "getAccount", "idt": "UUID", "repo_": "accounts",
           "exc": "AccountNotFoundException"},
          {"repo": JV_B, "path": "src/main/java/org/orchard/scheduler/JobService.java",
           "typ": "Job", "fn": "getJob", "idt": "long", "repo_": "jobRepository",
           "exc": "JobNotFoundException"},
      )),
    T(JV_A, "@path@", """\
     public void @fn@(@args@) {
+        log.info("@a@ " + @x@ + " @b@ " + @y@);""",
      '        log.info("@a@ {} @b@ {}", @x@, @y@);', "use placeholders",
      variants=(
          {"repo": JV_A, "path": "src/main/java/com/acmefin/ledger/PaymentProcessor.java",
           "fn": "process", "args": "String paymentId, String customerId",
           "a": "Processing payment", "b": "for", "x": "paymentId", "y": "customerId"},
          {"repo": JV_B, "path": "src/main/java/org/orchard/scheduler/Dispatcher.java",
           "fn": "dispatch", "args": "Job job, Worker worker", "a": "Dispatching",
           "b": "to", "x": "job.getId()", "y": "worker.getName()"},
      )),
    T(JV_A, "src/main/java/com/acmefin/ledger/LedgerController.java", """\
 public class LedgerController {
+    private LedgerRepository repository;""",
      "    private final LedgerRepository repository;", "can be final"),
    T(JV_A, "src/main/java/com/acmefin/ledger/Transfers.java", """\
     static void validate(BigDecimal amount) {
+        if (amount.equals(BigDecimal.ZERO)) {""",
      "        if (amount.compareTo(BigDecimal.ZERO) == 0) {",
      "`equals` also compares the scale, so `0.00` is not equal to `ZERO` here."),
    T(JV_B, "@path@", """\
     @sig@
+        if (@xs@.size() == 0) {""",
      "        if (@xs@.isEmpty()) {", "isEmpty()",
      variants=(
          {"repo": JV_B, "path": "src/main/java/org/orchard/scheduler/Queue.java",
           "sig": "public Job poll() {", "xs": "pending"},
          {"repo": JV_A, "path": "src/main/java/com/acmefin/ledger/Statement.java",
           "sig": "public Money total() {", "xs": "entries"},
      )),
    T(JV_B, "src/main/java/org/orchard/scheduler/Schedule.java", """\

+    public String toString() {""",
      "    @Override\n    public String toString() {", "missing @Override"),
    T(JV_B, "src/main/java/org/orchard/scheduler/Security.java", """\
     public static boolean isPrivileged(String role) {
+        List<String> roles = Arrays.asList("admin", "auditor");""",
      '        List<String> roles = List.of("admin", "auditor");', "we're on Java 17, `List.of`"),
    T(JV_A, "src/main/java/com/acmefin/ledger/OrderExport.java", """\
     List<String> orderIds(List<Order> orders) {
+        List<String> ids = new ArrayList<>();
+        for (Order o : orders) {
+            ids.add(o.getId());
+        }""",
      "        List<String> ids = orders.stream().map(Order::getId).toList();",
      "stream version", span=4),
    # ---------------------------------------------------------------- yaml
    T(JS_B, "@path@", """\
     steps:
+      - uses: actions/checkout@v3""",
      "      - uses: actions/checkout@v4", "@lead@",
      variants=(
          {"repo": JS_B, "path": ".github/workflows/ci.yml",
           "lead": "v4 is out (v3 runs on the deprecated node16)"},
          {"repo": GO_A, "path": ".github/workflows/test.yml", "lead": "checkout@v4"},
          {"repo": RS_B, "path": ".github/workflows/release.yml",
           "lead": "fyi, there's a v4 of this out now"},
      )),
    T(PY_A, "@path@", """\
       - uses: actions/setup-python@v5
         with:
+          python-version: @ver@""",
      '          python-version: "@ver@"',
      "Quote it, unquoted YAML reads this as the float @float@.",
      variants=(
          {"repo": PY_A, "path": ".github/workflows/tests.yml", "ver": "3.10", "float": "3.1"},
          {"repo": PY_C, "path": ".github/workflows/ci.yaml", "ver": "3.10", "float": "3.1"},
      )),
    T(GO_C, "deploy/k8s/agent-daemonset.yaml", """\
         resources:
           limits:
+            memory: 512M""",
      "            memory: 512Mi", "`M` is 10^6 bytes; you probably want `Mi`"),
    T(PY_B, "docker-compose.yml", """\
   db:
+    image: postgres:latest""",
      "    image: postgres:16.4", "please pin this, latest bit us last time"),
    T(JS_C, ".github/workflows/ci.yml", """\
 on:
   pull_request:

+jobs:""",
      "permissions:\n  contents: read\n\njobs:",
      "Let's restrict the token, this workflow doesn't need write access."),
    T(PY_D, ".github/workflows/test.yml", """\
     strategy:
       matrix:
+        python-version: ["3.8", "3.9", "3.10", "3.11"]""",
      '        python-version: ["3.10", "3.11", "3.12"]',
      "pyproject says >=3.10 now, and 3.8 is EOL"),
    T(GO_B, ".github/dependabot.yml", '''\
   - package-ecosystem: "gomod"
     directory: "/"
     schedule:
+      interval: "daily"''',
      '      interval: "weekly"', "daily is going to be noisy"),
    T(PY_C, ".pre-commit-config.yaml", """\
 -   repo: https://github.com/astral-sh/ruff-pre-commit
+    rev: v0.1.6""",
      "    rev: v0.6.9", "there's a newer ruff-pre-commit out"),
    T(GO_C, "deploy/overlays/prod/config.yaml", """\
     env:
+      LOG_LEVEL: debug""",
      "      LOG_LEVEL: info", "we shouldn't ship debug logging in the prod overlay"),
    # ---------------------------------------------------------------- markdown
    T(PY_A, "docs/exports.md", """\
 ## Exports

+You will recieve an email once the export is ready.""",
      "You will receive an email once the export is ready.", "typo: recieve"),
    T(PY_A, "README.md", """\
 ## Install

+```
+pip install meadow-etl
+```""",
      "```bash\npip install meadow-etl\n```", "add the language so it gets highlighted",
      span=3),
    T(GO_A, "docs/getting-started.md", """\

+See the [configuration guide](docs/configuration.md) for details.""",
      "See the [configuration guide](configuration.md) for details.",
      "This file is already in docs/, so the link is relative to it"),
    T(GO_C, "docs/architecture.md", """\
 ### Heartbeats

+Each agent reports it's status every 30 seconds.""",
      "Each agent reports its status every 30 seconds.", "it's -> its", crlf=True),
    T(JS_B, "CONTRIBUTING.md", """\

+### Running the tests""",
      "## Running the tests", "this should be a second-level heading like the others"),
    T(JS_B, "README.md", """\
 ```sh
+npm install --save kite-ui""",
      "npm install kite-ui", "`--save` has been the default since npm 5"),
    T(GO_B, "CHANGELOG.md", """\
 ### Fixed

+- Fixed crash when config file is empty""",
      "- Fixed a crash when the config file is empty (#412)",
      "wording + link the issue"),
    T(RS_A, "README.md", """\
 quill-fmt reads its settings from `quill.toml`. Most options have sensible defaults,
+e.g `max_width` is 100.""",
      "e.g., `max_width` is 100.", "nit"),
    T(RS_B, "@path@", """\
 @pre@

+@line@""",
      "@fixed@", "@lead@",
      variants=(
          {"repo": RS_B, "path": "docs/tuning.md", "pre": "## Pool size",
           "line": "Set the the number of workers with `TIDEPOOL_WORKERS`.",
           "fixed": "Set the number of workers with `TIDEPOOL_WORKERS`.", "lead": "the the"},
          {"repo": JV_B, "path": "docs/cron.md", "pre": "## Time zones",
           "line": "Schedules run in the the zone given by `orchard.timezone`.",
           "fixed": "Schedules run in the zone given by `orchard.timezone`.",
           "lead": "typo (double the)"},
      )),
    # ---------------------------------------------------------------- plain questions
    T(PY_B, "harbor/worker.py", """\
     proc.start()
+    time.sleep(2)""",
      None, body="Why do we need the sleep here? Is this a race with the worker startup?"),
    T(GO_A, "internal/server/server.go", """\
     s.listener = ln
+    go s.flushLoop()""",
      None, tabs=True,
      body="Is it safe to ignore ctx cancellation here? As far as I can tell this goroutine "
           "never stops on shutdown."),
    T(JS_A, "src/index.tsx", """\
+import "core-js/stable";""",
      None, new_file=True,
      body="Do we still need to support IE11? If not, this polyfill can go."),
    T(JV_A, "src/main/java/com/acmefin/ledger/Transfers.java", """\
     public Transfer create(TransferRequest req) {
+        auditLog.record(req);""",
      None, body="Should this be behind the `audit-v2` feature flag as well?"),
    T(JS_B, ".github/workflows/ci.yml", """\
   test:
     runs-on: ubuntu-latest
+    timeout-minutes: 60""",
      None, body="What's the reason for bumping the timeout to 60 minutes?"),
    T(RS_A, "src/lines.rs", """\
 pub fn wrap(text: &str, width: usize) -> Vec<String> {
+    if width == 0 {""",
      None, body="Could you add a test for the empty-input case too?"),
]
# fmt: on

PRE_COMMIT = """\
+repos:
+-   repo: https://github.com/pre-commit/pre-commit-hooks
+    rev: v4.5.0
+    hooks:
+    -   id: trailing-whitespace
+    -   id: end-of-file-fixer
+    -   id: check-yaml
+    -   id: debug-statements
+-   repo: https://github.com/PyCQA/flake8
+    rev: 6.1.0"""
FOUNDING = [
    (3, "fyi, there's a v5.0.0 of this out now\n```suggestion\n    rev: v5.0.0\n```"),
    (10, "and 7.0.0 of this\n```suggestion\n    rev: 7.0.0\n```"),
]
REPLIES = [
    "Done",
    "thanks, fixed",
    "Good catch, applied.",
    "Fixed in @sha@",
    "Done 👍",
    "I'd rather keep it as is for now, this module goes away in #@num@.",
]


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
    pr = gh.new_pr(PY_B)
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
# (lang, repo, old, new, comment); every line carries its '+'/' ' prefix here, and about
# half the records are written without it, as in the real data both styles occur.
# fmt: off
REFINEMENT: list[tuple[str, str, str, str, str]] = [
    ("py", "openmeadow/meadow-etl",
     " def get_user(user_id):\n+    user = User.objects.filter(id=user_id)[0]\n+    return user",
     " def get_user(user_id):\n+    return User.objects.get(id=user_id)",
     "Use .get() here, [0] raises IndexError instead of DoesNotExist."),
    ("py", "tidewater-io/harbor",
     "+    if len(@xs@) == 0:\n+        return", "+    if not @xs@:\n+        return",
     "Just `if not @xs@`."),
    ("py", "quantcraft/qc-backtest",
     "+    for k in params.keys():\n+        print(k, params[k])",
     "+    for k, v in params.items():\n+        print(k, v)", "iterate over items()"),
    ("py", "lhartmann/dotsync",
     "     except Exception as e:\n+        raise SyncError(str(e))",
     "     except Exception as e:\n+        raise SyncError(str(e)) from e",
     "Keep the original exception as the cause."),
    ("py", "tidewater-io/harbor",
     " class Cache:\n+    def __init__(self, size=100):\n+        self.size = size\n"
     "+        self.data = {}",
     " class Cache:\n+    def __init__(self, size: int = 100) -> None:\n+        self.size = size\n"
     "+        self.data: dict[str, bytes] = {}",
     "Please add type hints, the rest of the module has them."),
    ("py", "openmeadow/meadow-etl", "+import os, sys", "+import os\n+import sys",
     "one import per line please"),
    ("py", "quantcraft/qc-backtest", "+    return sorted(set(tags))",
     "+    return sorted(set(tags))", "LGTM"),
    ("py", "lhartmann/dotsync",
     '+    f = open(path, "w")\n+    f.write(content)\n+    f.close()',
     '+    with open(path, "w", encoding="utf-8") as f:\n+        f.write(content)',
     "use a with block"),
    ("py", "openmeadow/meadow-etl",
     ' def is_slug(s):\n+    if re.match(r"^[a-z0-9-]+$", s):\n+        return True\n'
     "+    return False",
     ' def is_slug(s):\n+    return re.fullmatch(r"[a-z0-9-]+", s) is not None',
     "This can return the match test directly."),
    ("js", "nodewright/queuey",
     "+var self = this;\n+setTimeout(function () {\n+  self.refresh();\n+}, 1000);",
     "+setTimeout(() => {\n+  this.refresh();\n+}, 1000);",
     "Use an arrow function instead of aliasing this."),
    ("js", "kitepaper/kite-ui",
     "+  return arr.filter(x => x != null).length > 0;",
     "+  return arr.some((x) => x != null);", "`some()` short-circuits"),
    ("js", "nodewright/queuey",
     " async function readJob(file) {\n+  const fs = require('fs');\n"
     "+  const data = fs.readFileSync(file, 'utf8');",
     " async function readJob(file) {\n+  const fs = require('fs/promises');\n"
     "+  const data = await fs.readFile(file, 'utf8');",
     "We're in an async function, don't block the event loop."),
    ("js", "brightpath/checkout-web",
     "+  Object.keys(defaults).forEach(function (key) {\n+    result[key] = defaults[key];\n+  });",
     "+  Object.assign(result, defaults);", "Object.assign does exactly this"),
    ("js", "nodewright/queuey",
     "+    if (typeof cb !== 'undefined') cb(err);", "+    if (typeof cb === 'function') cb(err);",
     "check that it's callable, not just defined"),
    ("js", "kitepaper/kite-ui", "+module.exports.timeout = 3000",
     "+module.exports.timeout = 3000;", "missing semicolon"),
    ("js", "brightpath/checkout-web", "+  const copy = JSON.parse(JSON.stringify(state));",
     "+  const copy = structuredClone(state);",
     "structuredClone keeps Dates and Maps intact"),
    ("java", "acmefin/ledger-service",
     "     public List<User> getUsers() {\n+        return users;\n     }",
     "     public List<User> getUsers() {\n+        return Collections.unmodifiableList(users);"
     "\n     }",
     "Don't hand out the internal list."),
    ("java", "orchard-oss/orchard-scheduler", "+        StringBuffer sb = new StringBuffer();",
     "+        StringBuilder sb = new StringBuilder();", "No need for synchronization here."),
    ("java", "acmefin/ledger-service",
     "+        } catch (Exception e) {\n+            e.printStackTrace();\n+        }",
     "+        } catch (IOException e) {\n+            LOG.warn(\"Failed to flush index\", e);\n"
     "+        }",
     "Catch the specific exception and use the logger."),
    ("java", "orchard-oss/orchard-scheduler",
     '+    private static final Logger log = Logger.getLogger("Scheduler");',
     "+    private static final Logger log = LoggerFactory.getLogger(Scheduler.class);",
     "we use slf4j everywhere else"),
    ("java", "acmefin/ledger-service",
     "+        Map<String, Integer> counts = new HashMap<String, Integer>();",
     "+        Map<String, Integer> counts = new HashMap<>();", "diamond operator"),
    ("java", "orchard-oss/orchard-scheduler",
     "+        if (counts.containsKey(key)) {\n+            counts.put(key, counts.get(key) + 1);\n"
     "+        } else {\n+            counts.put(key, 1);\n+        }",
     "+        counts.merge(key, 1, Integer::sum);", "`merge` does this in one call"),
    ("java", "acmefin/ledger-service", "+        Thread.sleep(1000);",
     "+        await().atMost(Duration.ofSeconds(5)).until(queue::isEmpty);",
     "Please avoid sleeps in tests, they are slow and flaky."),
    ("go", "stratalink/strata", "+    data, _ := ioutil.ReadAll(resp.Body)",
     "+    data, err := io.ReadAll(resp.Body)\n+    if err != nil {\n"
     "+        return nil, err\n+    }",
     "ioutil is deprecated, and don't drop the error"),
    ("go", "vantage-ops/vops-agent",
     " func (s *Server) handle(w http.ResponseWriter, r *http.Request) {\n+    s.mu.Lock()\n"
     "+    s.count++\n+    s.mu.Unlock()",
     " func (s *Server) handle(w http.ResponseWriter, r *http.Request) {\n+    s.count.Add(1)",
     "use an atomic.Int64 for this counter"),
    ("go", "gopherworks/rtail", "+        log.Fatal(err)",
     '+        return fmt.Errorf("start listener: %w", err)', "Don't exit from library code."),
    ("go", "stratalink/strata", "+    if @ok@ == true {", "+    if @ok@ {", "simplify"),
    ("go", "vantage-ops/vops-agent",
     "     var wg sync.WaitGroup\n     for _, u := range urls {\n+        wg.Add(1)\n"
     "+        go fetch(u, &wg)\n     }",
     "     var wg sync.WaitGroup\n     for _, u := range urls {\n+        wg.Add(1)\n"
     "+        go func(u string) {\n+            defer wg.Done()\n+            fetch(u)\n"
     "+        }(u)\n     }",
     "Let the goroutine own wg.Done so fetch doesn't need to know about it."),
    ("go", "gopherworks/rtail",
     " type Config struct {\n+    Port int\n+    Host string\n }",
     ' type Config struct {\n+    Port int    `yaml:"port"`\n+    Host string `yaml:"host"`\n }',
     "add yaml tags, the loader expects lower-case keys"),
    ("go", "stratalink/strata",
     "+    if err != nil {\n+        return err\n+    }\n+    return nil", "+    return err",
     "this is just `return err`"),
    ("cpp", "ironquill/quillcpp", "+    for (int i = 0; i < v.size(); i++) {",
     "+    for (size_t i = 0; i < v.size(); ++i) {", "signed/unsigned comparison"),
    ("cpp", "northpeak/vizor",
     "+    Widget* w = new Widget(parent);\n+    widgets.push_back(w);",
     "+    widgets.push_back(std::make_unique<Widget>(parent));",
     "widgets holds unique_ptr now, no raw new"),
    ("cpp", "northpeak/vizor", "+void process(std::string name) {",
     "+void process(const std::string& name) {", "pass by const ref"),
    ("cpp", "ironquill/quillcpp", "+    if (@p@ != NULL) {", "+    if (@p@ != nullptr) {",
     "nullptr"),
    ("cpp", "northpeak/vizor",
     "+    std::map<std::string, int>::iterator it = m.find(key);",
     "+    auto it = m.find(key);", "auto is fine here"),
    ("cpp", "ironquill/quillcpp", "+#define MAX_RETRIES 5", "+constexpr int kMaxRetries = 5;",
     "prefer constexpr over macros"),
    ("cpp", "northpeak/vizor", '+    std::cout << "done" << std::endl;',
     '+    std::cout << "done\\n";', "endl flushes every time"),
    ("rb", "ferrule/shopfront", "+    if !user.nil?\n+      user.name\n+    end",
     "+    user&.name", "safe navigation"),
    ("rb", "ferrule/shopfront",
     '   def full_name\n+    first_name + " " + last_name\n   end',
     '   def full_name\n+    "#{first_name} #{last_name}"\n   end', "use interpolation"),
    ("rb", "ferrule/shopfront", '+    Order.where(status: "paid").each do |order|',
     '+    Order.where(status: "paid").find_each do |order|', "find_each so it batches"),
    ("rb", "tallgrass/ledgerly", "+  validates_presence_of :email",
     "+  validates :email, presence: true", "newer validation syntax"),
    ("rb", "tallgrass/ledgerly", "+    return items.map { |i| i.price }.sum",
     "+    items.sum(&:price)", "sum with a block/symbol, no explicit return"),
    ("rb", "ferrule/shopfront", '+    puts "Processing #{file}"',
     '+    logger.info("Processing #{file}")', "use the logger"),
    ("php", "bluefern/invoicer",
     "+    $name = isset($_GET['name']) ? $_GET['name'] : 'guest';",
     "+    $name = $_GET['name'] ?? 'guest';", "null coalescing operator"),
    ("php", "bluefern/invoicer",
     '+    $stmt = $pdo->query("SELECT * FROM users WHERE id = " . $id);',
     '+    $stmt = $pdo->prepare("SELECT * FROM users WHERE id = ?");\n+    $stmt->execute([$id]);',
     "SQL injection: use a prepared statement"),
    ("php", "cobaltpress/cms", "+    if ($@n@ == 0) {", "+    if ($@n@ === 0) {",
     "strict comparison"),
    ("php", "cobaltpress/cms", "+    public function getTotal()\n+    {",
     "+    public function getTotal(): float\n+    {", "add the return type"),
    ("php", "bluefern/invoicer", "+        array_push($result, $row);",
     "+        $result[] = $row;",
     "`[]` is faster and shorter for one element"),
    ("c", "lowtide/tinyhttpd", "     char buf[64];\n+    strcpy(buf, name);",
     '     char buf[64];\n+    snprintf(buf, sizeof(buf), "%s", name);',
     "this overflows for long names"),
    ("c", "lowtide/tinyhttpd", "+    int *arr = malloc(n * sizeof(int));",
     "+    int *arr = malloc(n * sizeof(*arr));\n+    if (arr == NULL)\n+        return -ENOMEM;",
     "check malloc's result"),
    ("c", "marrow/kvlite", "+    if (fd = open(path, O_RDONLY) < 0)",
     "+    if ((fd = open(path, O_RDONLY)) < 0)", "precedence bug: fd gets the comparison"),
    ("c", "marrow/kvlite", "+    free(ctx->buf);", "+    free(ctx->buf);\n+    ctx->buf = NULL;",
     "null it so the cleanup path doesn't free it twice"),
    ("c", "lowtide/tinyhttpd", "+static int count_items(struct list *l)",
     "+static size_t count_items(const struct list *l)", "const and size_t"),
    ("cs", "harborlight/Harborlight.Api", "+            var result = client.GetAsync(url).Result;",
     "+            var result = await client.GetAsync(url);", "don't block on async code"),
    ("cs", "harborlight/Harborlight.Api", "+        public string Name { get { return _name; } }",
     "+        public string Name => _name;", "expression-bodied property"),
    ("cs", "quillsoft/Ledger.Core", "+            if (String.IsNullOrEmpty(input) == true)",
     "+            if (string.IsNullOrEmpty(input))", "no need for == true"),
    ("cs", "quillsoft/Ledger.Core",
     "             catch (Exception ex)\n             {\n"
     "+                throw ex;\n             }",
     "             catch (Exception ex)\n             {\n+                throw;\n             }",
     "`throw;` keeps the original stack trace"),
    ("cs", "harborlight/Harborlight.Api",
     "+        private List<Order> orders = new List<Order>();",
     "+        private readonly List<Order> _orders = new();", "readonly + field naming"),
    ("cs", "quillsoft/Ledger.Core",
     "+            int count = 0;\n+            foreach (var item in items)\n+            {\n"
     "+                if (item.IsActive) count++;\n+            }",
     "+            var count = items.Count(i => i.IsActive);", "LINQ Count with a predicate"),
]
# Near-duplicates: the same refinement with other names in other repos.
# Keyed by the placeholder a record uses.
REFINEMENT_VARIANTS = {
    "xs": [{"xs": "items"}, {"xs": "rows", "repo": "openmeadow/meadow-etl"}],
    "ok": [{"ok": "ok"}, {"ok": "found", "repo": "gopherworks/rtail"}],
    "p": [{"p": "ptr"}, {"p": "node", "repo": "northpeak/vizor"}],
    "n": [{"n": "count"}, {"n": "total", "repo": "bluefern/invoicer"}],
}
# fmt: on


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
def integrity(rng: random.Random) -> str:
    return "sha512-" + base64.b64encode(rng.randbytes(64)).decode()


def build_edits(rng: random.Random) -> list[list[str]]:
    r = rng
    rows: list[tuple[str, int, str, str, str, str, str]] = [
        (
            "kitepaper/kite-ui",
            311,
            "package-lock.json",
            '    "node_modules/lodash": {\n      "version": "4.17.20",\n'
            '      "resolved": "https://registry.npmjs.org/lodash/-/lodash-4.17.20.tgz",\n'
            f'      "integrity": "{integrity(r)}"',
            '    "node_modules/lodash": {\n      "version": "4.17.21",\n'
            '      "resolved": "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz",\n'
            f'      "integrity": "{integrity(r)}"',
            "Bumps lodash from 4.17.20 to 4.17.21.",
            "dependabot[bot]",
        ),
        (
            "brightpath/checkout-web",
            872,
            "package-lock.json",
            '    "node_modules/axios": {\n      "version": "1.6.7",\n'
            '      "resolved": "https://registry.npmjs.org/axios/-/axios-1.6.7.tgz",\n'
            f'      "integrity": "{integrity(r)}",',
            '    "node_modules/axios": {\n      "version": "1.7.2",\n'
            '      "resolved": "https://registry.npmjs.org/axios/-/axios-1.7.2.tgz",\n'
            f'      "integrity": "{integrity(r)}",',
            "Update dependency axios to v1.7.2",
            "renovate[bot]",
        ),
        (
            "openmeadow/meadow-etl",
            233,
            "poetry.lock",
            '[[package]]\nname = "requests"\nversion = "2.31.0"\n'
            'description = "Python HTTP for Humans."\noptional = false\npython-versions = ">=3.7"',
            '[[package]]\nname = "requests"\nversion = "2.32.3"\n'
            'description = "Python HTTP for Humans."\noptional = false\npython-versions = ">=3.8"',
            "Update dependency requests to v2.32.3",
            "renovate[bot]",
        ),
        (
            "quantcraft/qc-backtest",
            119,
            "poetry.lock",
            f'[metadata]\nlock-version = "2.0"\npython-versions = "^3.11"\n'
            f'content-hash = "{r.getrandbits(256):064x}"',
            f'[metadata]\nlock-version = "2.0"\npython-versions = "^3.11"\n'
            f'content-hash = "{r.getrandbits(256):064x}"',
            "please re-lock, the hash is stale after the rebase",
            "haruki-t",
        ),
        (
            "ironquill/quill-fmt",
            57,
            "Cargo.lock",
            '[[package]]\nname = "serde"\nversion = "1.0.193"\n'
            'source = "registry+https://github.com/rust-lang/crates.io-index"\n'
            f'checksum = "{r.getrandbits(256):064x}"',
            '[[package]]\nname = "serde"\nversion = "1.0.197"\n'
            'source = "registry+https://github.com/rust-lang/crates.io-index"\n'
            f'checksum = "{r.getrandbits(256):064x}"',
            "Bumps serde from 1.0.193 to 1.0.197.",
            "dependabot[bot]",
        ),
        (
            "saltmarsh/tidepool-rs",
            204,
            "Cargo.lock",
            '[[package]]\nname = "tokio"\nversion = "1.35.1"\n'
            'source = "registry+https://github.com/rust-lang/crates.io-index"\n'
            f'checksum = "{r.getrandbits(256):064x}"',
            '[[package]]\nname = "tokio"\nversion = "1.36.0"\n'
            'source = "registry+https://github.com/rust-lang/crates.io-index"\n'
            f'checksum = "{r.getrandbits(256):064x}"',
            "Update Rust crate tokio to 1.36.0",
            "renovate[bot]",
        ),
        (
            "tidewater-io/harbor",
            1408,
            "requirements.txt",
            "numpy==1.26.4\nrequests==2.31.0\nurllib3==2.2.1",
            "numpy==1.26.4\nrequests==2.32.3\nurllib3==2.2.1",
            "Bumps requests from 2.31.0 to 2.32.3.",
            "dependabot[bot]",
        ),
        (
            "lhartmann/dotsync",
            88,
            "requirements.txt",
            "django==4.2.11\npsycopg==3.1.18",
            "django==4.2.13\npsycopg==3.1.18",
            "Bumps django from 4.2.11 to 4.2.13.",
            "dependabot[bot]",
        ),
        (
            "brightpath/checkout-web",
            880,
            "package.json",
            '    "react": "^18.2.0",\n    "react-dom": "^18.2.0",',
            '    "react": "^18.3.1",\n    "react-dom": "^18.3.1",',
            "Update react monorepo to v18.3.1",
            "renovate[bot]",
        ),
        (
            "kitepaper/kite-ui",
            318,
            "package.json",
            '    "typescript": "5.3.3",',
            '    "typescript": "5.4.5",',
            "Update dependency typescript to v5.4.5",
            "renovate[bot]",
        ),
        (
            "quantcraft/qc-backtest",
            121,
            "requirements-dev.txt",
            "pytest==8.0.2\npytest-cov==4.1.0",
            "pytest==8.2.0\npytest-cov==4.1.0",
            "Update dependency pytest to v8.2.0",
            "renovate[bot]",
        ),
        (
            "tidewater-io/harbor",
            1391,
            "harbor/retry.py",
            "    delay = min(base * 2 ** attempt, cap)",
            "    delay = min(base * 2 ** attempt, cap)",
            "LGTM, leaving this as is",
            "mira-k",
        ),
        (
            "acmefin/ledger-service",
            640,
            "src/main/java/com/acmefin/ledger/Fees.java",
            "        return amount.multiply(rate).setScale(2, RoundingMode.HALF_EVEN);",
            "        return amount.multiply(rate).setScale(2, RoundingMode.HALF_EVEN);",
            "no change needed, banker's rounding is what finance asked for",
            "pwhitfield",
        ),
        (
            "quantcraft/qc-backtest",
            126,
            "qc_backtest/geometry.py",
            "    def area(self):    \n        return self.w * self.h  ",
            "    def area(self):\n        return self.w * self.h",
            "trailing whitespace",
            "grace-liu",
        ),
        (
            "openmeadow/meadow-etl",
            241,
            "src/meadow_etl/sinks/postgres.py",
            "    cur.execute(\"DELETE FROM staging WHERE batch_id = '%s'\" % batch_id)",
            '    cur.execute("DELETE FROM staging WHERE batch_id = %s", (batch_id,))',
            "Let the driver do the quoting, this is injectable.",
            "sanjayr",
        ),
        (
            "nodewright/queuey",
            77,
            "lib/retry.js",
            "var attempts = 0;\nvar maxAttempts = opts.maxAttempts || 5;",
            "let attempts = 0;\nconst maxAttempts = opts.maxAttempts ?? 5;",
            "let/const, and ?? so that 0 is respected",
            "b-ortiz",
        ),
        (
            "gopherworks/rtail",
            45,
            "tail/rotate.go",
            '\tos.Rename(cur, cur+".1")\n\treturn openNew(cur)',
            '\tif err := os.Rename(cur, cur+".1"); err != nil {\n'
            '\t\treturn nil, fmt.Errorf("rotate %s: %w", cur, err)\n\t}\n\treturn openNew(cur)',
            "the rename can fail (EXDEV), handle it",
            "tkowalski",
        ),
        (
            "saltmarsh/tidepool-rs",
            198,
            "src/task.rs",
            "    let name = task.name.clone();\n    registry.insert(name.clone(), task);",
            "    registry.insert(task.name.clone(), task);",
            "one clone is enough",
            "haruki-t",
        ),
        (
            "orchard-oss/orchard-scheduler",
            512,
            "src/main/java/org/orchard/scheduler/Trigger.java",
            "        return trigger.getNextFireTime().toInstant();",
            "        Date next = trigger.getNextFireTime();\n"
            "        return next == null ? null : next.toInstant();",
            "getNextFireTime() is null once the trigger is done",
            "elenavoss",
        ),
        (
            "brightpath/checkout-web",
            891,
            "src/types/payment.ts",
            'export enum PaymentState {\n  Pending = "pending",\n  Paid = "paid",\n}',
            'export type PaymentState = "pending" | "paid";',
            "a string union is lighter than an enum and matches the API",
            "quokka-dev",
        ),
        (
            "tidewater-io/harbor",
            1415,
            "harbor/jobs.py",
            '    assert job.state == "queued", "job already started"',
            '    if job.state != "queued":\n        raise JobStateError("job already started")',
            "asserts are stripped with -O, raise instead",
            "nadia-s",
        ),
        (
            "vantage-ops/vops-agent",
            301,
            "docker-compose.yml",
            "  agent:\n    image: vops-agent:dev\n    restart: unless-stopped",
            "  agent:\n    image: vops-agent:dev\n    restart: unless-stopped\n    healthcheck:\n"
            '      test: ["CMD", "vops-agent", "health"]\n      interval: 30s',
            "add a healthcheck so compose knows when it's up",
            "dmitri-o",
        ),
        (
            "lhartmann/dotsync",
            91,
            "scripts/install.sh",
            "#!/bin/sh\nset -e",
            "#!/usr/bin/env bash\nset -euo pipefail",
            "fail on unset vars and in pipes too",
            "jdoyle",
        ),
        (
            "stratalink/strata",
            1122,
            "Dockerfile",
            "RUN apt-get update && apt-get install -y curl ca-certificates",
            "RUN apt-get update \\\n    && apt-get install -y --no-install-recommends curl "
            "ca-certificates \\\n    && rm -rf /var/lib/apt/lists/*",
            "smaller image: no recommends, drop the apt lists",
            "mira-k",
        ),
        (
            "acmefin/ledger-service",
            655,
            "src/main/resources/db/migration/V42__fees.sql",
            "ALTER TABLE fees ADD COLUMN currency CHAR(3);",
            "ALTER TABLE fees ADD COLUMN currency CHAR(3) NOT NULL DEFAULT 'EUR';",
            "existing rows need a value, and it should never be null",
            "pwhitfield",
        ),
        (
            "orchard-oss/orchard-scheduler",
            519,
            "src/main/kotlin/org/orchard/scheduler/Stats.kt",
            "    val failed = runs.filter { it.failed }.size",
            "    val failed = runs.count { it.failed }",
            "count { } avoids the temp list",
            "grace-liu",
        ),
        (
            "nodewright/queuey",
            81,
            "lib/consumer.js",
            "  // wait until we recieve the first message",
            "  // wait until we receive the first message",
            "typo",
            "b-ortiz",
        ),
        (
            "brightpath/checkout-web",
            897,
            "src/styles/button.css",
            ".btn-primary {\n  color: #FFFFFF;\n  background: #1A73E8;\n}",
            ".btn-primary {\n  color: var(--color-on-primary);\n  background: var(--color-primary);"
            "\n}",
            "use the theme variables",
            "quokka-dev",
        ),
        (
            "stratalink/strata",
            1130,
            "internal/raft/snapshot.go",
            '\t\treturn fmt.Errorf("write snapshot: %v", err)',
            '\t\treturn fmt.Errorf("write snapshot: %w", err)',
            "%w so errors.Is works",
            "tkowalski",
        ),
        (
            "tidewater-io/harbor",
            1420,
            "harbor/api/schemas.py",
            "class JobOut(BaseModel):\n    id: int\n    name: str",
            "class JobOut(BaseModel):\n    id: int\n    name: str\n    state: JobState",
            "the UI needs the state too",
            "sanjayr",
        ),
    ]
    t = datetime(2024, 3, 4, 9, 0, 0, tzinfo=timezone.utc)
    out = []
    for i, (repo, pr, path, before, after, comment, who) in enumerate(rows):
        t += timedelta(hours=rng.randint(3, 140), minutes=rng.randint(0, 59))
        created = iso(t)
        if i in (9, 21):  # a couple of exports kept the local offset
            created = (t + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S+02:00")
        out.append([repo, str(pr), path, before, after, comment, who, created])
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
