def local_only():
    return "ignored by the nested .gitignore"
