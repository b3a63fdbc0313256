"""`ledger init`'s ledger.toml has an `[[alerts]]` stub that works once uncommented."""

import re
from pathlib import Path

from ledger.edges.configfile import load_config


def test_the_alerts_stub_uncommented_is_a_valid_alerts_table(home: Path):
    toml = home / "ledger.toml"
    text = toml.read_text()
    assert "# [[alerts]]" in text
    stub = text.split("# [[alerts]]", 1)[1].split("\n\n", 1)[0]
    lines = ["[[alerts]]"] + [re.sub(r"^# ", "", line) for line in stub.strip().splitlines()]
    toml.write_text(text + "\n" + "\n".join(lines) + "\n")
    config = load_config(toml, {})
    (rule,) = config.alert_rules
    assert rule.url.startswith("https://hooks.slack.com/")
    assert "unavailable" in rule.on
    assert config.alert_check_seconds == 10
