"""Fixtures and makers outside the package: the fixed sample data set and its Console stand-in
(for the TUI tests, the screenshots and the console benchmarks), and the screenshot maker. None
of it ships in the wheel."""
