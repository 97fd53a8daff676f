"""The ground floor: frozen records every layer passes around, and each vocabulary defined once.

Plain dataclasses and constants, no I/O, and no import from any other part of ctxbench: messages
(``messages``), plan inputs and results (``plans``), retrieval sets (``retrieval``), symbols, cards and
parsed files (``code``), parsed transcripts (``transcripts``), sessions, settings and stored plans
(``sessions``), model-call traces (``traces``), the events of a turn (``turns``), the errors every
front end may catch (``errors``), the vocabularies (``vocab``), and which session the texts derived in a block of
work belong to (``derived``: a context variable and the per-session holding the caches of masking and counts share).
"""
