"""The application layer every front end uses (CLI, TUI, and the servers).

- :mod:`.workbench` — the unit of work over one database: repositories, ``transaction()``, plans;
- :mod:`.settings` — a session's settings, checked once where they enter;
- :mod:`.attach` — the one path that indexes a repository and plugs its retrieval into a workbench;
- :mod:`.runner` — the turn runner, built in one place;
- :mod:`.session` — one open session of the workbench: what the screens and the demo ask of the engine,
  with typed events out;
- :mod:`.proxy` — the proxy's domain: wire formats, steering, reply recording, exchanges and the watch.

Front ends import this package and :mod:`ctxbench.records`; nothing here imports a UI library.
"""
