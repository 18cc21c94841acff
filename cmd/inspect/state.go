package main

// The state of a filter, the same four values in every command (ls, info,
// check): the bare word in a STATE column or "state" field; how many WAL
// records are pending is a separate PENDING column or
// "pending_wal_records" field.
const (
	// stateOK: nothing pending, the files are whole.
	stateOK = "ok"
	// stateIncomplete: a bulk Load was interrupted (or is running), or
	// an external op on it was skipped (the catalog says loading, or a
	// load record is pending); its lookups answer "maybe" until it is
	// dropped.
	stateIncomplete = "incomplete"
	// stateNeedsRecovery: WAL records after the filter's checkpoint name
	// it; the next writer Open replays them. A running writer's filters
	// are usually in this state.
	stateNeedsRecovery = "needs recovery"
	// stateBroken: its files are missing or damaged; lookups answer
	// "maybe".
	stateBroken = "broken"
)

// filterState is the state of a filter that is broken (its files are
// missing or damaged), incomplete (an interrupted bulk Load), or has
// pending WAL records after its checkpoint, in that order of precedence.
func filterState(broken, incomplete bool, pending int) string {
	switch {
	case broken:
		return stateBroken
	case incomplete:
		return stateIncomplete
	case pending > 0:
		return stateNeedsRecovery
	}
	return stateOK
}
