"""What an ingest must not do quietly: count telemetry twice, or merge another fleet.

All run inside the ingest's transaction, on the rows of the call (tagged with its
ingest id) and those the store held before it (the telemetry guards where :func:`mixed`):

- :func:`raw_within_rolled` and :func:`telemetry_overlap`: rolled-up telemetry
  (``fleetaudit rollup``: rows with ``samples``) and raw telemetry of the same GPU and
  time would both count in the productive figures. Raw rows of the call that rolled
  rows (stored, or of the call) cover are refused, before anything replaces a stored
  row by key; rolled rows of the call replace the stored raw rows they cover.
- :func:`fleet_changes`: a call whose nodes turn most of the stored nodes they replace
  into nodes of another GPU model, or share no node and no switch with the store's, is
  most likely another fleet: a note says so (``--strict`` refuses it).
"""

from __future__ import annotations

from fleetaudit.core.errors import InputError
from fleetaudit.model.store import Store

# A rolled row stands for the raw samples of its GPU from its ts to its last sample.
_COVERS = """
    r.node_id = {t}.node_id AND r.gpu_index = {t}.gpu_index AND {t}.ts >= r.ts
    AND {t}.ts <= r.ts + to_microseconds(
        CAST(round(coalesce((r.samples - 1) * r.sample_interval_s, 0) * 1e6) AS BIGINT))
"""


def mixed(store: Store) -> bool:
    """Whether telemetry holds both raw rows and rolled-up ones (``samples``): the two
    telemetry guards have nothing to look for otherwise (one scan, asked once a call)."""
    if "samples" not in {c.lower() for c in store.column_types("telemetry")}:
        return False  # no rolled rows anywhere
    kinds = store.small_frame(
        "SELECT count(*) FILTER (samples IS NULL) AS raw, "
        "count(*) FILTER (samples IS NOT NULL) AS rolled FROM telemetry"
    ).row(0, named=True)
    return bool(kinds["raw"] and kinds["rolled"])


def raw_within_rolled(store: Store, ingest_id: int) -> None:
    """Refuse raw rows of this call that rolled rows cover. Run before the call's rows
    replace stored ones by key: a raw row at a stored rolled row's own key would
    otherwise replace it, and the samples it stood for, unseen. Called where
    :func:`mixed`.

    Raises:
        InputError: such rows (nothing is written).
    """
    raw_new = int(
        store.scalar(
            "SELECT count(*) FROM telemetry AS t WHERE t._ingest_id = $id AND t.samples IS NULL "
            f"AND EXISTS (SELECT 1 FROM telemetry AS r WHERE r.samples IS NOT NULL AND "
            f"{_COVERS.format(t='t')})",
            {"id": ingest_id},
        )
    )
    if raw_new:
        raise InputError(
            "telemetry",
            f"{raw_new:,} raw row(s) of this call fall within rolled-up rows (fleetaudit "
            "rollup) of the same GPUs, which already count those samples: ingest raw "
            "telemetry into a store without its rollup, or roll it up too",
        )


def telemetry_overlap(store: Store, ingest_id: int, strict: bool) -> list[str]:
    """Rolled rows of this call replace the stored raw rows they cover (run after the
    replace by key, :func:`raw_within_rolled` before it); returns the notes. Called
    where :func:`mixed`.

    Raises:
        InputError: with ``strict``, where rolled rows of this call would replace
            stored raw rows (nothing is written).
    """
    # DELETE takes no alias: the stored rows are telemetry's own; its count is the
    # number replaced, and under --strict the call's transaction takes it back
    stale = int(
        store.run(
            "DELETE FROM telemetry WHERE _ingest_id <> $id AND samples IS NULL AND EXISTS ("
            "SELECT 1 FROM telemetry AS r WHERE r._ingest_id = $id AND r.samples IS NOT NULL AND "
            + _COVERS.format(t="telemetry")
            + ")",
            {"id": ingest_id},
        )
        or 0
    )
    if not stale:
        return []
    if strict:
        raise InputError(
            "telemetry",
            f"the rolled-up rows of this call cover {stale:,} raw row(s) the store holds, "
            "which they would replace (--strict writes nothing)",
        )
    return [
        f"telemetry: the rolled-up rows replaced {stale:,} raw row(s) of the same GPUs and "
        "times that the store held (both would have counted those samples)"
    ]


def fleet_changes(store: Store, ingest_id: int, strict: bool) -> list[str]:
    """Notes on a call's nodes that look like another fleet than the store's.

    Read before the call's nodes replace the stored ones of the same node_id.

    Raises:
        InputError: with ``strict``, where a note would be given (nothing is written).
    """
    row = store.small_frame(
        """
        WITH old AS (SELECT node_id, gpu_model, switch_id FROM nodes WHERE _ingest_id <> $id),
             new AS (SELECT node_id, gpu_model, switch_id FROM nodes WHERE _ingest_id = $id)
        SELECT (SELECT count(*) FROM old) AS stored,
               (SELECT count(*) FROM new) AS incoming,
               (SELECT count(*) FROM new JOIN old USING (node_id)) AS shared,
               (SELECT count(*) FROM new JOIN old USING (node_id)
                WHERE new.gpu_model IS DISTINCT FROM old.gpu_model) AS remodelled,
               (SELECT count(DISTINCT new.switch_id) FROM new JOIN old USING (switch_id))
                   AS shared_switches,
               (SELECT string_agg(node_id || ': ' || old_model || ' -> ' || new_model, ', ')
                FROM (SELECT node_id, old.gpu_model AS old_model, new.gpu_model AS new_model
                      FROM new JOIN old USING (node_id)
                      WHERE new.gpu_model IS DISTINCT FROM old.gpu_model
                      ORDER BY node_id LIMIT 3)) AS examples
        """,
        {"id": ingest_id},
    ).row(0, named=True)
    stored, incoming = int(row["stored"] or 0), int(row["incoming"] or 0)
    notes = []
    shared, remodelled = int(row["shared"] or 0), int(row["remodelled"] or 0)
    if remodelled >= 2 and 2 * remodelled > shared:
        notes.append(
            f"nodes: {remodelled:,} of the {shared:,} stored nodes this call replaces (the "
            f"store held {stored:,}) are now of another GPU model ({row['examples']}, ...): "
            "is this export of the same fleet?"
        )
    if stored and incoming and not row["shared"] and not row["shared_switches"]:
        notes.append(
            f"nodes: this call's {incoming:,} nodes share no node and no switch with the "
            f"{stored:,} the store holds: another fleet is being merged into this one "
            "(ingest it into a store of its own with --db), unless this one grew by them"
        )
    if notes and strict:
        raise InputError("nodes", f"{notes[0].removeprefix('nodes: ')} (--strict writes nothing)")
    return notes
