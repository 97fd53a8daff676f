def broken(:
    return
