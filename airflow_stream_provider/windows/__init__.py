"""The window engine: one core for every window trigger, run in batch and by the streaming detector."""
