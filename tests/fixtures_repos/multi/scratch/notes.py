def scratch():
    pass
