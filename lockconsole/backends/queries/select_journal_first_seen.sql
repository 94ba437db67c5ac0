-- The holder journal: the first sighting of a holding that is open (after an upsert that
-- may have kept another sampler's earlier one).
SELECT holding, first_seen FROM lockconsole_holder_journal
WHERE open_mark = 1 AND holding = %(holding)s
