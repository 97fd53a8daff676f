"""The workbench served to a browser (``ctxbench serve``): textual-serve behind a loopback guard.

``guard`` says who may reach it (the loopback Host and Origin of its port, the launch token); ``server`` is
textual-serve's server with that guard on every route, a cap on concurrent sessions, and a page that loads
nothing from outside this machine.
"""
