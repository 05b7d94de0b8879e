"""The knobs of ranking (``MemoryIndex.rank``): how many items each stage considers and how
much each signal weighs. A query profile (``profiles.py``) sets its own. Pure Python: no Django
import.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RankParams:
    # Query terms (stems) that shape a question rather than say what it is about: a profile's.
    drop: frozenset[str] = frozenset()
    pool: int = 1000
    candidates: int = 300
    prf_docs: int = 3
    prf_terms: int = 8
    prf_weight: float = 0.3
    seeds: int = 5
    hops: int = 2
    decay: float = 0.8
    activation_weight: float = 1.0
    activation_min: float = 0.05
    activation_frontier: int = 12
    activated_max: int = 24
    stream_window: int = 2
    stream_weight: float = 0.5
    stream_sources: int = 40
    coordination: float = 0.75
    stream_backward: float = 0.7
    # Entities the query names seed activation at full strength; the items of entities reached
    # from them lend relevance by their salience (see ``MemoryDoc.salience``).
    named_seed: float = 1.0
    # The entities of the best items seed it too, at this share of the item's relevance: they
    # are what the query found, not what it asked about.
    item_seed: float = 0.3
    # A bonus below this is not lent: raised to the packer's sharpness it would be nothing.
    bonus_min: float = 0.1
    # "what changed since <date>": items before that day keep this share of their relevance.
    before_since: float = 0.3
    # When the query names the title of some items (in a conversation: a speaker), the items
    # with another title lose this share of their relevance: a question about a person is
    # answered by what that person said, the other side's turns are context. 0: off.
    title_prior: float = 0.0
    # BM25's length normalisation (b): None, the index's (0.75, as rank-bm25). Lower lets the
    # extra words of a longer item count less against it.
    length_norm: float | None = None
    # A query word of at least this many letters that no item holds, whose stem extends a
    # known one by at most ``derived_extra`` letters ("Himalayan" where items say "Himalaya",
    # "entrepreneurial" where they say "entrepreneur"), is read as that known stem: another
    # form of a word should not lose it. 0: off.
    derived_min: int = 7
    derived_extra: int = 3
    # Related terms: each query term (a title excepted: a name has no synonyms) also reads as
    # up to ``related_terms`` of the corpus's terms whose vectors are at least ``related_min``
    # similar to its own; a document gains ``related_weight`` x the best similarity x BM25
    # score among them, per query term. 0: off.
    related_weight: float = 0.0
    related_min: float = 0.45
    related_terms: int = 8
    # The semantic backend, when the index has sentence vectors and the query one: the
    # ``semantic_candidates`` items most similar to the query by cosine gain, scaled from 1 (the
    # most similar) down to 0 (the last of them), ``semantic_weight`` x the best lexical score
    # (BM25 with feedback), before activation and stream neighbours. 0: off.
    semantic_weight: float = 0.5
    semantic_candidates: int = 50


DEFAULT_PARAMS = RankParams()
