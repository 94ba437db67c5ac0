-- End connection %(id)s only if it holds %(name)s at this moment: KILL evaluates its
-- expression at execution, so a changed holder makes it KILL 0 (error 1094, nothing killed).
KILL CONNECTION IF(IS_USED_LOCK(%(name)s) = %(id)s, %(id)s, 0)
