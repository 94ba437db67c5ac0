-- Fallback for servers that refuse an expression in KILL: run right after checking the holder.
KILL CONNECTION %(id)s
