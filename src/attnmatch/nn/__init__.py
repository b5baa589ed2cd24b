"""Small shared, tested primitives (masking, similarity). Models live in `attnmatch.models`."""
