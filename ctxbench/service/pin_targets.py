"""Pin targets that exist: a pin is only stored for something a plan can show.

``check_pin_target`` raises ``ValueError`` with one clear line when a target names nothing: a symbol the
code index does not have (with the closest names), a file it did not index, a turn the session does not
have, a memo that is not stored. ``text:`` pins carry their own content and always exist; ``pin:ID``
re-pins an existing pin (the pin store checks that id).
"""
from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, Iterable

from ctxbench.records.errors import NotFound
from ctxbench.records.item_refs import CardRef, ItemRef, OtherRef, PathRef
from ctxbench.records.vocab import PIN_TARGET_PREFIXES

if TYPE_CHECKING:
    from ctxbench.service.workbench import Workbench

CLOSE_NAMES = 3  # names offered when a symbol is not found
MAX_ID = 2**63 - 1  # SQLite's largest INTEGER: a larger turn id names nothing (and cannot even be looked up)


def check_pin_target(wb: Workbench, session_id: str, target: str, code_index: Any = None,
                     shown: Iterable[str] = ()) -> None:
    """Raise ValueError unless ``target`` names something that exists (``code_index``: the attached
    ``CodeIndex``, None when the session has no repository yet; ``shown``: the item ids of the plan on
    screen, whose cards exist whatever retrieval produced them)."""
    if target in set(shown):
        return
    ref = ItemRef.parse(target)
    kind = ref.kind
    if f"{kind}:" not in (*PIN_TARGET_PREFIXES, "pin:") or (isinstance(ref, OtherRef) and not ref.value):
        raise ValueError(f"cannot pin {target!r}: expected group:ID, atom:ID, card:SYMBOL, path:FILE, memo:ID, "
                         "text:LABEL or pin:ID")
    if kind in ("text", "pin"):
        return
    if isinstance(ref, (CardRef, PathRef)):
        if code_index is None:
            raise ValueError(f"cannot pin {target}: no repository is indexed for this session")
        if isinstance(ref, CardRef) and ref.symbol not in code_index.symbols:
            name = ref.symbol
            tails = sorted(sid for sid in code_index.symbols if sid.endswith("." + name))
            close = tails[:CLOSE_NAMES] or difflib.get_close_matches(name, list(code_index.symbols), CLOSE_NAMES)
            hint = f"; did you mean {', '.join(str(CardRef(c)) for c in close)}?" if close else ""
            raise ValueError(f"cannot pin {target}: the code index of {code_index.root} has no symbol {name}{hint}")
        if isinstance(ref, PathRef) and ref.path.removeprefix("./") not in code_index.by_path:
            raise ValueError(f"cannot pin {target}: {ref.path} is not a file of the indexed repository {code_index.root}")
        return
    if kind in ("group", "atom"):
        group = ref.group_id
        try:
            found = group is not None and 1 <= group <= MAX_ID and wb.messages.group(session_id, group)
        except NotFound:
            found = False
        if not found:
            raise ValueError(f"cannot pin {target}: this session has no turn "
                             f"{group if group is not None else ref.value if isinstance(ref, OtherRef) else ''}")
        return
    if kind == "memo" and isinstance(ref, OtherRef):
        if not any(str(m.id) == ref.value for m in wb.memory.memos()):
            raise ValueError(f"cannot pin {target}: there is no memo {ref.value}")
