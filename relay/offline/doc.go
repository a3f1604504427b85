// Package offline holds the relay's offline tools over a log of JSON
// lines (events or export lines): the operator's Importer, which verifies
// every event on every core and appends the valid ones to an eventlog.Log
// (as a bulk load when the import is large), and the auditor's Replayer,
// which verifies a log and rebuilds every derived view from nothing,
// registered modules' folds included, so its state digest can be compared
// with a relay's GET /state. Neither needs a running relay.
package offline
