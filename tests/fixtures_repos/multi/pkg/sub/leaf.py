def leaf_value() -> int:
    return 7
