"""Every field the official SDKs can send is classified by the estimate's allowlist.

Each request parameter of the Anthropic and OpenAI SDKs' create-params types,
each content part, input item, tool type and beta in their unions, and each
field of google-genai's request models must be counted by a named rule or
listed as counting as the context window. A release that adds one fails here
until its provider module classifies it.
"""

import pytest

from ledger.providers import anthropic, gemini, openai
from ledger.providers.tally import RULES
from tests.unit.providers import sdk_fields


def classified(sent: set[str], known: dict[str, str] | set[str] | frozenset[str]) -> set[str]:
    """The names in ``sent`` that ``known`` leaves out."""
    return {name for name in sent if name not in known}


def test_every_allowlist_rule_is_a_named_rule():
    """A listed field's rule is one of the tally's rules (or a stated formula)."""
    tables = [anthropic.MESSAGES_FIELDS, openai.CHAT_FIELDS, openai.RESPONSES_FIELDS,
              gemini.REQUEST_FIELDS, gemini.GENERATION_CONFIG_FIELDS]  # fmt: skip
    for table in tables:
        assert set(table.values()) <= RULES


ANTHROPIC = sdk_fields.anthropic_fields()
OPENAI = sdk_fields.openai_fields()
GEMINI = sdk_fields.gemini_fields()


@pytest.mark.parametrize(
    ("sent", "known"),
    [
        pytest.param(ANTHROPIC["fields"], anthropic.MESSAGES_FIELDS, id="anthropic-fields"),
        pytest.param(ANTHROPIC["blocks"], anthropic.BLOCK_TYPES, id="anthropic-blocks"),
        pytest.param(ANTHROPIC["betas"], anthropic.BETAS, id="anthropic-betas"),
        pytest.param(OPENAI["chat fields"], openai.CHAT_FIELDS, id="chat-fields"),
        pytest.param(OPENAI["chat parts"], openai.PART_TYPES, id="chat-parts"),
        pytest.param(OPENAI["chat tools"], openai.TOOL_TYPES, id="chat-tools"),
        pytest.param(OPENAI["responses fields"], openai.RESPONSES_FIELDS, id="responses-fields"),
        pytest.param(OPENAI["responses items"], openai.ITEM_TYPES, id="responses-items"),
        pytest.param(OPENAI["responses parts"], openai.PART_TYPES, id="responses-parts"),
        pytest.param(OPENAI["responses tools"], openai.TOOL_TYPES, id="responses-tools"),
    ],
)
def test_every_sdk_field_is_classified(sent, known):
    assert sent, "the SDK's types were not read"
    assert classified(sent, known) == set()


def test_every_anthropic_tool_type_is_classified():
    """Tool types count by family (their type without the version date)."""
    families = {anthropic.tool_family(kind) for kind in ANTHROPIC["tools"]}
    assert len(ANTHROPIC["tools"]) > len(families) > 5
    assert classified(families, anthropic.TOOL_TYPES) == set()


@pytest.mark.parametrize(
    ("sent", "known"),
    [
        pytest.param(
            GEMINI["config"],
            {
                **gemini.REQUEST_FIELDS,
                **gemini.GENERATION_CONFIG_FIELDS,
                **dict.fromkeys(gemini.CLIENT_ONLY_FIELDS, "never sent"),
            },
            id="generate-content-config",
        ),
        pytest.param(GEMINI["generation config"], gemini.GENERATION_CONFIG_FIELDS, id="config"),
        pytest.param(GEMINI["content"], {"parts": "walked", "role": "a setting"}, id="content"),
        pytest.param(GEMINI["part"], gemini.PART_FIELDS, id="part"),
        pytest.param(GEMINI["tool"], gemini.TOOL_FIELDS, id="tool"),
        pytest.param(GEMINI["declaration"], gemini.DECLARATION_FIELDS, id="declaration"),
    ],
)
def test_every_google_genai_field_is_classified(sent, known):
    """google-genai names fields in snake_case; the REST API takes either spelling."""
    assert sent, "google-genai's models were not read"
    assert classified({gemini.camel(name) for name in sent}, known) == set()
