"""Streams: their definitions, computations, outputs and runs."""
