"""What fired: each module finds the triggers of one kind of trigger, for a run or a recalculation."""
