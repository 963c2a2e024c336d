"""Spark sessions (in-process or the stream node over Spark Connect) and where the node is."""
