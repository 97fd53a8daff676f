"""LoCoMo conversations as ctxbench reads them: turns, questions, and a transcript to import.

A LoCoMo file (Maharana et al., ACL 2024) holds one long conversation between two speakers in dated
sessions (``session_N`` turns with ``speaker``, ``dia_id``, ``text`` and optionally an image's
``blip_caption``; ``session_N_date_time``) and questions (``qa``: ``question``, ``evidence`` dia ids,
``category``). Categories 1-4 are answerable; 5 (adversarial) has no evidence in the conversation and is
left out, as are the few questions without evidence ids.

A turn's text is ``[date] speaker: text`` plus `` [shared image: caption]`` when it shares one — what a
plain baseline script ranks and what the imported message says. The annotations LoCoMo adds beside the
turns (observations, session summaries, event lists) are never read: a real session has none.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ctxbench.records.transcripts import Transcript, TranscriptMessage

ANSWERABLE = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}  # as the README names them
ROLE_MAPPINGS = {"ab": ("user", "assistant"), "ba": ("assistant", "user")}  # speaker_a, speaker_b
DATE_FORMAT = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"
_SESSION = re.compile(r"session_(\d+)")


class LocomoError(ValueError):
    """A LoCoMo file that cannot be read as one."""


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str  # the turn as scored and imported: "[date] speaker: text [shared image: caption]"
    session: int
    created_at: str  # the session's date as ISO 8601 ("" when it cannot be read)


@dataclass(frozen=True)
class Question:
    question: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Conversation:
    id: str  # the file's stem: 26, 30, ...
    speakers: tuple[str, str]
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]  # answerable ones with evidence


def turn_text(date: str, speaker: str, text: str, caption: str = "") -> str:
    out = f"[{date}] {speaker}: {text}"
    return out + f" [shared image: {caption}]" if caption else out


def _iso(date: str) -> str:
    try:
        return datetime.strptime(date.strip(), DATE_FORMAT).isoformat()
    except ValueError:
        return ""


def load_conversation(path: Path) -> Conversation:
    """Read one LoCoMo file; raises LocomoError naming the file and what is wrong."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LocomoError(f"{path}: cannot read it as JSON ({exc})") from None
    if not isinstance(data, dict) or "qa" not in data or "speaker_a" not in data:
        raise LocomoError(f"{path}: not a LoCoMo conversation (no speaker_a / qa)")
    sessions = sorted(int(m.group(1)) for key in data if (m := _SESSION.fullmatch(key)))
    turns: list[Turn] = []
    for number in sessions:
        date = str(data.get(f"session_{number}_date_time", ""))
        for raw in data[f"session_{number}"] or ():
            try:
                text = turn_text(date, raw["speaker"], raw["text"], raw.get("blip_caption") or "")
                turns.append(Turn(raw["dia_id"], raw["speaker"], text, number, _iso(date)))
            except (KeyError, TypeError) as exc:
                raise LocomoError(f"{path}: session_{number} has a turn without {exc}") from None
    questions = tuple(
        Question(str(q["question"]), tuple(str(e) for e in q["evidence"]), int(q["category"]))
        for q in data["qa"] if int(q.get("category", 0)) in ANSWERABLE and q.get("evidence"))
    if not turns:
        raise LocomoError(f"{path}: no turns")
    return Conversation(Path(path).stem, (str(data["speaker_a"]), str(data["speaker_b"])), tuple(turns), questions)


def find_conversations(folder: Path, ids: list[str] | None = None) -> list[Path]:
    """The conversation files in ``folder`` (``N.json``), all or the ones named; LocomoError for a missing one."""
    folder = Path(folder)
    if not folder.is_dir():
        raise LocomoError(f"{folder} is not a folder")
    found = {p.stem: p for p in folder.glob("*.json")}
    if ids:
        missing = [i for i in ids if i not in found]
        if missing:
            raise LocomoError(f"no conversation {', '.join(missing)} in {folder} (there: {', '.join(sorted(found))})")
        return [found[i] for i in ids]
    if not found:
        raise LocomoError(f"no LoCoMo conversation files (N.json) in {folder}")
    return [found[k] for k in sorted(found, key=lambda s: (len(s), s))]


def to_transcript(conversation: Conversation, roles: str = "ab") -> Transcript:
    """The conversation as chat messages: one speaker the user, the other the assistant (``roles``); a user
    message starts a turn (group); each message keeps its dia id and its session's date."""
    role_of = dict(zip(conversation.speakers, ROLE_MAPPINGS[roles]))
    messages: list[TranscriptMessage] = []
    group = -1
    for number, turn in enumerate(conversation.turns, start=1):
        role = role_of.get(turn.speaker, "user")
        if role == "user" or group < 0:
            group += 1
        messages.append(TranscriptMessage(line=number, group=group, role=role, content=turn.text,
                                          external_id=turn.dia_id, created_at=turn.created_at))
    return Transcript(source=f"locomo {conversation.id}", format="locomo", messages=tuple(messages))
