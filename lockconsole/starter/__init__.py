"""`lockconsole init`: probe a database and write a commented starter lockconsole.toml."""
