"""Pure decisions about a stream, made once from its definition: schedule, ids, window plan, tasks."""
