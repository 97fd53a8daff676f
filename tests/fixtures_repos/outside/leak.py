def leak():
    """Outside the repository: must never be indexed."""
    return "outside"
