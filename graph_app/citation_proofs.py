"""The proofs of a compiled bundle: each cited record in full with its RFC 6962 inclusion proof
against the graph's Merkle root over every record, the root signed like audit checkpoints.
"""

from __future__ import annotations

import json

from django.conf import settings

from graph_app.contracts.compile import (
    CompileResult,
    InclusionProof,
    RootSignature,
    SignedRoot,
    SourceBundle,
    SourceItem,
)
from graph_app.domain.proofs import audit_path, record_times, root_sign, tree_levels
from graph_app.merkle_leaves import graph_leaves
from memoryproject.checkpoint_key import checkpoint_key
from memoryproject.domain.hashing import leaf_hash, merkle_root_of_leaf_hashes, sha256_hex
from memoryproject.errors import ConflictError
from memoryproject.models import Project
from memoryproject.timeutil import iso, utcnow


def _root_signed(root: SignedRoot) -> SignedRoot:
    """The root signed like audit checkpoints (HMAC-SHA256, AUDIT_CHECKPOINT_KEY); unsigned, and
    saying so, when no key is set. A key set but too short is refused, as for checkpoints."""
    if not getattr(settings, "AUDIT_CHECKPOINT_KEY", ""):
        return root
    mac = root_sign(root.as_json(), checkpoint_key())
    return root.model_copy(update={"signed": True, "signature": RootSignature(hmac=mac)})


def citation_bundle(project: Project, result: CompileResult) -> SourceBundle:
    """The compiled items with their full records and RFC 6962 inclusion proofs against the
    graph's Merkle root over every record (the root integrity verification computes)."""
    graph = graph_leaves(project=project)
    levels = tree_levels([leaf_hash(data) for data in graph.leaves])
    position = {key: index for index, key in enumerate(graph.keys)}
    size = len(graph.leaves)
    items = []
    for item in result.items:
        index = position.get((item.kind, item.id))
        if index is None:
            raise ConflictError(
                f"{item.kind} {item.id} left the memory while its proof was made: compile again"
            )
        data = graph.leaves[index]
        record = json.loads(data)
        items.append(
            SourceItem(
                id=item.id,
                kind=item.kind,
                citation=item.citation,
                text=data.decode("utf-8"),
                sha256=sha256_hex(data),
                proof=InclusionProof(
                    leaf_index=index,
                    tree_size=size,
                    audit_path=[h.hex() for h in audit_path(levels, index)],
                ),
                **record_times(record),
            )
        )
    root = SignedRoot(
        project=project.slug,
        revision=graph.revision,
        tree_size=size,
        root=merkle_root_of_leaf_hashes(levels[-1]).hex(),
        time=str(iso(utcnow())),
        signed=False,
        signature=None,
    )
    return SourceBundle(
        project=project.slug, query=result.query, root=_root_signed(root), items=items
    )
