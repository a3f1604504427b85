// Package tasks derives the state of every ANP2 task (seed §18, decisions D5,
// D6, D9) from the set of kind 50–55 events. It is the one derivation behind
// GET /task/{id}, the A2A adapter and the credit ledger.
//
// A Fold takes events in any order (Add, Remove) and answers at a time now and
// under a verifier-weight function w. Every answer depends only on the set of
// events added and not removed, on now and on w; never on arrival order.
//
// # Rules
//
// Events and roles. The task_id is the id of the kind 50. Kinds 51–55 belong
// to the task named by their ["e", task_id, "root"] tag, or without one by
// their own-role e tag (protocol.TaskRoot); events with neither are ignored. An event whose content fails its
// protocol parser (stored from a peer or an import, D15) is recorded with
// reason "content_invalid: <code>" and never counts.
// A kind 50 whose content fails protocol.ParseTaskRequest is not a task.
// "Earliest" and "latest" are by (created_at, id) (protocol.Less).
//
// Cancel (kind 55). The earliest kind 55 by the requester counts when it
// precedes (by (created_at, id)) the earliest kind 51, or there is no kind 51.
// A counting cancel makes the task cancelled; every kind 51 is then a losing
// bid (after_cancel) and no later event counts. A kind 55 from anyone else
// (not_requester) or after the first kind 51 (after_accept) is ignored.
//
// Accept (kind 51). The winning accept is the earliest kind 51 that satisfies
// the §18.4 price rule (protocol.AcceptPriceViolation); its author is the
// provider. The others are losing bids; one that breaks the price rule has
// the rule's code as its reason.
//
// Result (kind 52). The counting result is the earliest kind 52 authored by
// the provider with created_at ≤ deadline_unix, whatever its order relative
// to the accept (one-second clocks put an accept and its result in either
// order). A result without an accept e tag (the live network's shape) is
// judged the same way, so it is attributed to the winning accept when its
// author is the provider. Results by others (not_provider), after the deadline
// (after_deadline) or after the counting one (superseded) are ignored.
//
// Timeout. With no counting result, the task is timed_out at any now >
// deadline_unix; the transition is dated deadline_unix. created_at is
// self-reported: the relay's publish window bounds how far a result can be
// back-dated, and the fold cannot tell.
//
// Verdicts (kind 53). A verdict is neutral when its author is neither the
// requester nor the provider; others are recorded (by_requester,
// by_provider) and carry no weight. Each neutral verifier's latest verdict
// counts; earlier ones are superseded. Verdicts count once the task has a
// counting result, in any order relative to it.
//
// Consensus, ordinary tasks ("unanimous"): over the counting verdicts,
// all passed → passed; all failed → failed; no verdict → none (status
// completed); anything else (a pass and a fail, or any neutral "disputed") →
// disputed. Weights play no part.
//
// Consensus, high-stakes tasks ("m_of_n", §18.6.1). A task is high-stakes
// when constraints.high_stakes is true or its (non-credit) reward is above 10
// in currency USD or USD-stable. Verdicts count only when created_at ≤ window_end =
// result.created_at + 2 × max(0, deadline_unix − request.created_at); after
// it they are ignored (after_window). Each verifier's weight is w(agent_id),
// clamped to [0, 1e6] (NaN counts 0) and quantized to integer micro-units,
// so sums are exact and independent of order and CPU. A verifier of weight 0
// neither weighs nor counts (zero_weight). With N the number of counting
// verifiers of positive weight and M = max(3, ceil(0.51 × N)), the consensus is the
// verdict whose summed weight is strictly the largest and positive, provided
// at least M verifiers gave it; otherwise there is none yet. A consensus of
// "disputed" makes the task disputed. With none at now > window_end the task
// is disputed, dated window_end.
//
// Consensus score: ordinary tasks, the mean score of the counting verdicts
// that carry one; high-stakes, the weight-averaged score. Null when no
// counting verdict carries a score. Reported rounded to 1e-6.
//
// Payment (kind 54). The earliest kind 54 by the requester counts when the
// task has a winning accept: disposition release → paid, refund → refunded,
// whatever stage the task reached (a requester may pay before verification
// or refund after a timeout). It is an announcement: credit settles on the
// consensus alone (package credit). Others are ignored (not_requester,
// no_accept, superseded).
//
// Status. cancelled; otherwise paid/refunded when a payment counts;
// otherwise, with no counting result, timed_out past the deadline, else
// accepted when there is a winning accept, else pending; with a counting
// result, verified when the consensus is passed or failed, disputed when it
// is disputed (or high-stakes and the window closed without one), else
// completed. An accept dated after the deadline with no counting result
// leaves the task pending until it times out.
//
// Phase. "demo" when the reward's or the counting payment's payment_method
// is mocked (§18.8); absent otherwise.
//
// History. The transitions in lifecycle order: pending (the request),
// accepted, completed, each change of consensus (verified or disputed, with
// the verdict), timed_out or the window's disputed, paid/refunded or
// cancelled (preceded by timed_out when the cancel came after the deadline).
// Each entry names the event that caused it (none for the time transitions)
// and is dated at its cause, but never before the previous entry.
//
// Weights. Only high-stakes consensus reads w; it is called once per
// counting verifier per query. Views, statuses and settlements under a given
// (set, now, w) are deterministic: integer weight sums, scores summed in
// (created_at, id) order without fused multiply-add, floats rounded to 1e-6.
package tasks
