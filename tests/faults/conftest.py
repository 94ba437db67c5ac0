"""Faults injected into real runs: a process paused at a named fault point (tests.support.barrier)
and killed, stopped or left hanging there; servers restarted or cut off mid-run; clocks shifted
(tests/support/clockshim); many instances racing for one slot. billing_worker.py is the
instance these tests start; fault_helpers.py, row_locks.py and hung_peers.py are their helpers.
Nothing here is a fixture shared by the folder: each test module sets up its own servers."""
