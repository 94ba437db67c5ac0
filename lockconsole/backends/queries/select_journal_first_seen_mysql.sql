-- The holder journal: the first sightings of the holdings that appeared, as the upsert left
-- them (PyMySQL sends a tuple as a parenthesised list).
SELECT holding, first_seen FROM lockconsole_holder_journal
WHERE open_mark = 1 AND holding IN %(holdings)s
