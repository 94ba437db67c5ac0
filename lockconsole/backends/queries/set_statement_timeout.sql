SELECT set_config('statement_timeout', %(timeout)s, false)
