"""Settings, with a credential that must never reach a card."""

OPENAI_API_KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


def client_headers() -> dict:
    """Headers for the API client."""
    token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB"
    return {"Authorization": f"Bearer {token}"}


def harmless() -> int:
    """Nothing secret here."""
    return 42
