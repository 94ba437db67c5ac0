"""Retention: pruning the run ledger's old attempts in short batches, keeping the verdict of
every pruned slot that was not plain ok."""
