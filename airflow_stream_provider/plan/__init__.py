"""Pure decisions about a stream, made once from its definition: its kind, schedule, ids and tasks."""
