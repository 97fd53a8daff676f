def vendored():
    pass
