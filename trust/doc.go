// Package trust derives the trust graph (trust.v1, seed §4.7, §5.4, §6) and
// moderation visibility (§4.8, §7) from the event log.
//
// Two views, Graph and Moderation, each fold events in with Add, withdraw
// revoked ones with Remove, and hash their state with Digest. Every query
// result and every digest is a function of the set of events added minus
// those removed, and of the evaluation time; never of arrival order
// (decisions D6). The rules below are the exact ones implemented.
//
// # Evaluation time
//
// Every result is exact for the set of events and one evaluation time.
// Compute, At and Digest evaluate at EvalTime(now) = now rounded down to a
// whole minute, so that /state and replays are reproducible; published
// snapshots (Refresh, Current) are evaluated at the second they are
// computed, so that reads reflect new votes and flags within seconds.
//
// # Trust graph (trust.v1)
//
//   - Votes are kind 6 events whose content passes protocol.ParseVote; one
//     vote per distinct 64-hex p tag. A p tag naming the voter itself is
//     ignored (self-votes never count). Other events are ignored.
//   - Per (voter, target) only the latest vote by (created_at, id) counts.
//     A latest score of 0 withdraws the pair: it is left out of every
//     aggregate and out of "votes" unless include_withdrawn is asked for.
//   - c(v,T) = score × exp(−ln2 × age_days / 30), age_days =
//     max(0, (now − created_at) / 86400); votes dated after now count with
//     age 0.
//   - sybil(v) = min(1, n/3) × new_agent(v), n = number of targets of v's
//     nonzero latest votes; new_agent(v) = 0.5 + 0.5 × min(1, age / 14
//     days), age = max(0, now − first_seen(v)), first_seen the earliest
//     created_at of v's kind 0 events and counted votes (seed §6
//     sybil_penalty for new agents).
//   - Jacobi iteration from trust = 0:
//     trust'[T] = Σ_v sqrt(max(0, trust[v]+1)) × sybil(v) × c(v,T),
//     at most 20 passes, stopping after the first pass whose
//     max |trust' − trust| < 1e-4. iterations counts the passes
//     run; converged says whether that stop condition was met.
//   - score_in = Σ c(v,T) over nonzero latest incoming votes (decayed, not
//     weighted); score_out = Σ score over the agent's nonzero latest outgoing
//     votes (raw); voter_count = number of those incoming voters.
//   - All reported numbers are rounded to 6 decimals (math.Round(x×1e6)/1e6),
//     and everything downstream (rank, Weight, weight_mod) uses the rounded
//     weighted_score.
//   - rank: 1 for the highest weighted_score, ties by agent_id ascending,
//     over agents with a nonzero weighted_score; every other agent has rank
//     0. "Top p%" is rank ≥ 1 and rank ≤ ceil(p × ranked / 100).
//   - Weight(a) = sqrt(max(0, weighted_score(a) + 1)) is the voter weight
//     used for M-of-N verifier consensus (§18.6.1).
//   - GET /trust_graph lists agents with at least one nonzero latest incoming
//     vote, highest weighted_score first, ties by agent_id.
//   - trust_received (§5.4.1) reads the latest vote of each voter, skips
//     withdrawals, filters created_at ≥ since and score ≥ min_score, orders
//     newest first (created_at, then id, descending), keeps limit rows;
//     score_sum and count are over the rows returned; reasons are cut to 120
//     runes.
//
// Sums run in agent-id order, and every product feeding a sum is rounded
// before the addition (no fused multiply-add), with a portable exp, so the
// numbers are bit-identical on every CPU.
//
// # Moderation
//
//   - Flags are kind 7 events whose content passes protocol.ParseFlag, one
//     per distinct 64-hex e tag (the target). Every event of any kind is
//     also folded in for its author (to recognise the target's author) and
//     its created_at (for the active-agent count).
//   - hide_threshold = max(3, 0.001 × active), active = agents with at least
//     one live event whose created_at is in (now − 30 days, now].
//   - weight_mod(a) = clamp(1 + weighted_score(a), 0, 10), from the trust
//     graph at the same evaluation time.
//   - A flag by the target's author is an appeal (§7.3): it never weighs and
//     never replaces anything. An appeal is "counted" (for notices) when no
//     earlier counted appeal on the event is less than 24 h older. The
//     author is known once the target event itself has been added; until
//     then the author's flags count like anyone's.
//   - Every other flagger's latest flag so far, by (created_at, id), is
//     their current flag. Its sign is 0 when it is an appeal (category
//     "appeal" or tag ["appeal","true"]); −(1 + k), capped at −3, when it is
//     an override (category "override" or tag ["override","true"]) and the
//     flagger is in the top 5% by rank; +1 otherwise (an override without
//     the rank counts as a normal flag). k counts the distinct
//     ["cosign", <agent_id>, …] tags of the override whose agent is neither
//     the flagger nor the author and whose signature verifies over the
//     flag's kind and content (protocol.Cosignatures), or whose own current
//     flag on the same event is an override (so a bare tag alone cannot
//     forge consensus).
//   - flag_weight = Σ weight_mod(flagger) × sign over current flags, summed
//     exactly in millionths. flag_count = number of current flags with sign
//     > 0.
//   - History: replay the flags with created_at ≤ now in (created_at, id)
//     order, using the weights, ranks and threshold at now. After all flags
//     of second t, the desired state is hidden iff flag_weight ≥
//     hide_threshold. Visibility starts visible and becomes the desired state
//     at the earliest instant τ ≤ now at which the two differ and τ ≥ the
//     previous transition + 3600 s (the first transition is immediate).
//     Each transition is recorded as {at, visibility, flag_weight}. A change
//     the debounce still holds back is reported as pending, with its time.
//   - first_hidden_at is the first transition (always to hidden);
//     hidden_since is the last one while hidden.
//
// # Snapshots and concurrency
//
// Both views are safe for one writer (Add, Remove) and many readers. Compute
// returns an exact result for a time; Digest hashes it (SHA-256 of the JCS
// form of a JSON document, floats rounded to 6 decimals, lists sorted).
// Queries read immutable snapshots published through atomic pointers:
// Current never computes on the request path (except the very first time or
// when the published snapshot is more than MaxLag behind); it triggers at
// most one background refresh when the snapshot is due: the minute changed,
// a flag dated after the snapshot or a debounced transition takes effect,
// or, at most every MinInterval, events changed. A snapshot states the Now and
// Version it reflects. Moderation snapshots are numbered (Seq) and list the
// events whose visibility changed since the previous one (Changed), also
// passed to ModerationOptions.OnPublish; Moderation.Run refreshes
// periodically so that time-driven transitions are published without
// readers.
package trust
