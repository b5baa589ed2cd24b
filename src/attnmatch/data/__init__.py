"""Data: files -> examples -> ids -> batches."""
