"""The ``ledger.toml`` that ``ledger init`` writes: every key with its default.

Kept apart from the parser (``ledger.core.config``): this is text for people to
edit, that is the contract of what the text may say.
"""

import json

BILLING_NONE = "none"

# Why the threshold is what it is, written beside it so the choice stays visible.
_STALE_HALT_OBSERVED = """# Without a billing observer ([observer] below) verdicts halt
# (billing_stale) above this % of a cap: near it only the provider's bill is trusted.
# 100 counts ledger's own records only (`ledger init --billing none`).
stale_halt_pct = 75"""

_STALE_HALT_NONE = """# `ledger init --billing none`: no billing observer. Spend is ledger's own
# records only. That is fine when agents reach the provider only through the
# gateway with gateway keys; spend made out of band with the same provider key
# is not seen.
stale_halt_pct = 100"""


def config_template(daily_cap_usd: str | None, billing: str | None = None) -> str:
    """The ``ledger.toml`` that ``ledger init`` writes.

    ``billing`` is ``"none"`` when the home counts its own records only
    (``--billing none``): verdicts then never halt for want of a bill.
    """
    stale_halt = _STALE_HALT_NONE if billing == BILLING_NONE else _STALE_HALT_OBSERVED
    cap_line = (
        f"daily_cap = {daily_cap_usd}"
        if daily_cap_usd is not None
        else "# daily_cap = 50.0   # required by `ledger verdict`"
    )
    return f"""# ledger configuration. Environment variables LEDGER_<SECTION>_<KEY>
# override these values.

[usd]
{cap_line}
warn_pct = 90
reservation_ttl_seconds = 900
# day_timezone = "UTC"   # the budget day runs from midnight to midnight in this IANA zone
# providers = ["openai", "anthropic"]   # a verdict naming any other provider is refused
# [usd.provider_caps]
# openai = 5.0

[billing]
freshness_seconds = 300
{stale_halt}
stale_seconds = 900
provider_lag_seconds = 300
clock_tolerance_seconds = 60
# `ledger daemon` reads each reconciled provider's bill this often (0: off)
poll_seconds = 240

[observer]
# command = ["/usr/bin/python3", "/opt/ledger/observers/file_observer.py"]
timeout_seconds = 30
# More variables for the observer than PATH, HOME, LANG, ANTHROPIC_*, OPENAI_*,
# *_ADMIN_KEY and LEDGER_OBSERVER_*: env = ["HTTPS_PROXY", "SSL_CERT_FILE"]

[reconcile]
interval_hours = 6
drift_threshold_pct = 5.0
providers = ["aggregate"]

[snapshot]
cron = "0 4 * * *"
keep_days = 30

[chain]
lock_timeout_seconds = 10
verify_interval_hours = 24   # `ledger daemon` verifies the whole chain this often (0: off)
idempotency_days = 35        # idempotency keys this old leave the fast index (still honoured)
segment_entries = 1000000    # events.jsonl is sealed into segments/ at this many entries
segment_days = 0             # ... or once its first entry is this many days old (0: off)

# A PostgreSQL database shared by a fleet of hosts; without it the
# chain is events.jsonl in this home.
# [store]
# url = "postgresql://ledger@db.internal/ledger"
# schema = "ledger"

# Price overrides, USD per million tokens; they win over genai-prices.
# [prices."anthropic/claude-sonnet-4-6"]
# input_per_mtok = 3.0
# output_per_mtok = 15.0
# cache_read_per_mtok = 0.3      # default: the input rate
# cache_write_per_mtok = 3.75    # default: the input rate

# The gateway `ledger proxy`; with listen set, `ledger daemon` runs it too.
# [proxy]
# listen = "127.0.0.1:8787"
# passthrough = []                 # more paths to forward ungated, e.g. ["/v1/files"]
# max_request_bytes = 33554432
# upstream_timeout_seconds = 600
# max_upstream_connections = 100
# default_max_output_tokens = 32000  # the output limit of a request that sets none
# clamp = true                     # send a call that does not fit with the most output that does
# min_output_tokens = 1024         # ...but never less than this; below it the call is refused
# drain_seconds = 30               # a stream the client closed is read this long more for its usage
# server_tool_max_uses = 5         # web searches a request gets when it sets no limit
# require_keys = false             # true: every request needs a gateway key (`ledger keys issue`)
# tls_certfile = "/etc/ledger/gateway.pem"  # with tls_keyfile: serve HTTPS (other machines)
# tls_keyfile = "/etc/ledger/gateway.key"
# [proxy.upstream]
# anthropic = "https://api.anthropic.com"
# openai = "https://api.openai.com"
# google = "https://generativelanguage.googleapis.com"
# An OpenAI-compatible provider, served at /deepseek/v1/chat/completions and /deepseek/v1/responses:
# [proxy.providers.deepseek]
# url = "https://api.deepseek.com/v1"  # its OpenAI SDK base_url; /chat/completions is added
# key_env = "DEEPSEEK_API_KEY"     # the gateway's own key, used with gateway keys
# The cloud routes /bedrock, /vertex and /azure (served only with require_keys = true):
# [proxy.bedrock]
# region = "us-east-1"             # default: the gateway's AWS_REGION
# [proxy.azure]
# endpoint = "https://acme.openai.azure.com"
# deployments = {{ prod-gpt5 = "gpt-5" }}   # each deployment's model

# The web console `ledger console`; with listen set, `ledger daemon` runs it too.
# [console]
# listen = "127.0.0.1:8788"
# session_hours = 12               # how long a sign-in lasts
# timezone = "UTC"                 # pages' zone; default usd.day_timezone
# tls_certfile = "/etc/ledger/console.pem"   # beyond loopback: TLS files...
# tls_keyfile = "/etc/ledger/console.key"
# behind_proxy = false             # ...or a TLS reverse proxy in front
# Alerts: the daemon POSTs one JSON message per state to each webhook (Slack, Teams, any URL).
# [[alerts]]
# url = "https://hooks.slack.com/services/T000/B000/XXXX"
# on = ["warn", "halt", "uncertainty", "broken", "unavailable", "drift"]   # leave out for all
# check_seconds = 10                # how often the daemon looks (the smallest of all tables)

# Budgets: a USD cap over a period for the calls that match (see docs/budgets.md).
# [[budgets]]
# name = "research-monthly"
# usd = 200
# period = "month"                  # day | week | month | total | rolling:<N>h | rolling:<N>d
# match = {{ agent = "research-*" }}  # agent, provider, model, session, key, tag, client (globs)
# per = "session"                   # optional: one cap per session | agent | key
# alert_pcts = [50, 80, 100]        # optional: a `warn` alert at each used-spend percentage
"""


_FLEET_USD = """# [usd] and [[budgets]] are this fleet's, kept in its store: every host
# decides under them. Change them with `ledger config push FILE`; this
# file keeps this host's own settings (listen addresses, store, TLS).
"""


def host_config_template(billing: str | None = None) -> str:
    """The ``ledger.toml`` of a host joining a fleet whose caps its store holds."""
    text = config_template(None, billing)
    start = text.index("[usd]\n")
    end = text.index("[billing]\n")
    budgets = text.index("# Budgets: a USD cap")
    return text[:start] + _FLEET_USD + "\n" + text[end:budgets].rstrip("\n") + "\n"


def store_section(url: str, schema: str) -> str:
    """The ``[store]`` table ``ledger init`` adds to a new config for a fleet."""
    return f"\n[store]\nurl = {json.dumps(url)}\nschema = {json.dumps(schema)}\n"
