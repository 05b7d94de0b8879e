"""Query profiles: how a query's words are read and how its answer is packed.

The same words mean different things to different askers. In a chat log, "what kind of", "how
many times", "would ... likely" and "did ... mention" only shape a question, and "yeah", "oh"
are fillers; in an engineering question "what kind of cache", "how many times it retries" and
"the return type of parse_config" carry the very thing asked about. So what a query drops
belongs to a profile, not to the tokenizer every query meets:

- ``code`` (the default): drops nothing beyond English stop words. For agents asking about a
  codebase's memory.
- ``dialogue``: also drops chat fillers and question scaffolding, and reads each query word as
  also meaning the corpus's words nearest to it (``termvectors.py``): people say "Spain" when
  asked about "European countries". For memory made of conversation turns (``manage.py
  locomo_eval`` uses it). The code profile keeps to the words an agent wrote: near an
  identifier or a service name, a neighbour in meaning is another thing, not a synonym.

The dialogue profile's packing constants were chosen by cross-validation across LoCoMo
conversations (tuned on four, measured on the fifth, each in turn); the code profile keeps the
defaults, and its activation constants were set on the generated engineering memory
(``manage.py memory_eval``). Pure Python: no
Django import.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graph_app.domain.ranking_params import RankParams
from graph_app.domain.tokenize import stems

# Words a chat question is made of without saying what it is about.
DIALOGUE_SCAFFOLDING = (
    "kind",
    "kinds",
    "type",
    "types",
    "sort",
    "sorts",
    "likely",
    "ever",
    "many",
    "much",
    "times",
    "think",
    "say",
    "says",
    "said",
    "mention",
    "mentioned",
    "describe",
    "described",
)
# Interjections of spoken language.
DIALOGUE_FILLERS = ("yes", "yeah", "oh", "hey", "hi", "ok", "okay")

# How much an agent about to change an entity needs each kind of item about the entities near
# it: invariants, decisions and known bug causes first, then what happened, then notes.
SALIENCE = {
    "invariant": 1.0,
    "adr": 0.7,
    "bug_root_cause": 0.7,
    "incident": 0.6,
    "migration": 0.6,
    "fact": 0.6,
    "session_note": 0.3,
}
DEFAULT_SALIENCE = 0.3


@dataclass(frozen=True)
class Profile:
    """A query profile: ranking parameters (with the words it drops) and packing constants."""

    name: str
    rank: RankParams = field(default_factory=RankParams)
    # Relevance is normalised to the best match (1.0) and raised to this power before packing
    # by utility per token: a flat curve would let many short, weak lines crowd out a strong one.
    sharpness: float = 10.0
    # Full lines may fill this share of the budget; the items after them come as previews: the
    # episode's best-matching sentences in at most ``preview_tokens`` tokens, still cited.
    full_share: float = 0.35
    preview_tokens: int = 16


CODE = Profile(name="code")
# Chosen by leave-one-conversation-out cross-validation on the LoCoMo development split
# (``manage.py locomo_eval --cross-validate``; the grid is in benchmarks/locomo/tuning.py),
# maximising full-evidence recall: whole turns the reader can read, not citations of previews.
# Every fold chose the whole budget for full lines.
DIALOGUE = Profile(
    name="dialogue",
    rank=RankParams(
        drop=stems(DIALOGUE_SCAFFOLDING + DIALOGUE_FILLERS),
        before_since=1.0,
        stream_weight=0.5,
        title_prior=0.85,
        length_norm=0.5,
        related_weight=0.35,
    ),
    full_share=1.0,
    preview_tokens=32,
)
PROFILES: dict[str, Profile] = {p.name: p for p in (CODE, DIALOGUE)}


def salience(kind: str) -> float:
    """The salience of a fact (``"fact"``) or of an episode of that category."""
    return SALIENCE.get(kind, DEFAULT_SALIENCE)
