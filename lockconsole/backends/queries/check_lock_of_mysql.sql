SELECT COALESCE(IS_USED_LOCK(%(name)s) = %(pid)s, 0)
