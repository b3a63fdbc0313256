"""The Claude Code ``env`` settings that route it to a cloud through the gateway (pure).

In Bedrock or Vertex mode Claude Code signs nothing when told to skip the
cloud's auth, and sends ``ANTHROPIC_AUTH_TOKEN`` as ``Authorization: Bearer``
to the base URL it is given: the gateway's ``/bedrock`` or ``/vertex/v1``,
which signs each call with its own cloud credentials.
"""


def bedrock_env(gateway: str, region: str) -> dict[str, str]:
    """Claude Code on Bedrock through ``gateway`` (its ``AWS_REGION`` picks the model ids)."""
    return {
        "CLAUDE_CODE_USE_BEDROCK": "1",
        "ANTHROPIC_BEDROCK_BASE_URL": f"{gateway}/bedrock",
        "CLAUDE_CODE_SKIP_BEDROCK_AUTH": "1",
        "AWS_REGION": region,
    }


def vertex_env(gateway: str, project: str, region: str) -> dict[str, str]:
    """Claude Code on Vertex AI through ``gateway``, in ``project`` and ``region``."""
    return {
        "CLAUDE_CODE_USE_VERTEX": "1",
        "ANTHROPIC_VERTEX_BASE_URL": f"{gateway}/vertex/v1",
        "CLAUDE_CODE_SKIP_VERTEX_AUTH": "1",
        "ANTHROPIC_VERTEX_PROJECT_ID": project,
        "CLOUD_ML_REGION": region,
    }
