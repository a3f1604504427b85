package tasks

import (
	"math"

	"github.com/anp2net/relay/protocol"
)

// derivation is the part of a task's state that depends only on its events
// (not on now or the weights). It is cached per task and dropped on change.
type derivation struct {
	accept  *rec // winning accept; nil when none or cancelled
	cancel  *rec // counting cancel
	result  *rec // counting result
	payment *rec // counting payment
	// verdicts are the valid neutral kind 53 (high-stakes: inside the
	// window), by (created_at, id), superseded ones included; the replay
	// keeps each verifier's latest. Empty without a counting result.
	verdicts   []*rec
	latest     []*rec // each verifier's latest of verdicts, by (created_at, id)
	verifiers  int    // distinct authors of verdicts (len(latest))
	highStakes bool
	windowEnd  int64 // high-stakes verification window end (0 when none)
	fixed      *run  // consensus of an ordinary task (weight-free)
}

// derive returns t's cached derivation, computing it when missing. Callers
// hold the fold's read lock, so t does not change meanwhile.
func (t *task) derive() *derivation {
	if d := t.cache.Load(); d != nil {
		return d
	}
	d := computeDerivation(t)
	t.cache.Store(d)
	return d
}

func computeDerivation(t *task) *derivation {
	req := t.request
	requester := t.req.agent
	d := &derivation{highStakes: req.HighStakes}
	// An accept whose quote breaks the §18.4 price rule never wins, whether
	// it was mirrored or stored before its request (publish rejects it).
	accept := firstValid(t.list(protocol.KindTaskAccept), func(r *rec) bool { return priceViolation(r, req) == "" })
	cancel := firstValid(t.list(protocol.KindTaskCancel), func(r *rec) bool { return r.agent == requester })
	if cancel != nil && (accept == nil || recLess(cancel, accept)) {
		d.cancel = cancel
		return d
	}
	if accept == nil {
		return d
	}
	d.accept = accept
	d.result = firstValid(t.list(protocol.KindTaskResult), func(r *rec) bool {
		return r.agent == accept.agent && r.at <= req.Deadline
	})
	d.payment = firstValid(t.list(protocol.KindPayment), func(r *rec) bool { return r.agent == requester })
	if d.result == nil {
		return d
	}
	if d.highStakes {
		d.windowEnd = d.result.at + 2*max(0, req.Deadline-t.req.at)
	}
	last := map[uint32]*rec{}
	for _, v := range t.list(protocol.KindTaskVerify) {
		if v.valid && v.agent != requester && v.agent != accept.agent && (!d.highStakes || v.at <= d.windowEnd) {
			d.verdicts = append(d.verdicts, v)
			last[v.agent] = v
		}
	}
	for _, v := range d.verdicts {
		if last[v.agent] == v {
			d.latest = append(d.latest, v)
		}
	}
	d.verifiers = len(d.latest)
	if !d.highStakes {
		d.fixed = replay(d, nil)
	}
	return d
}

// priceViolation returns the code of the §18.4 price rule accept r breaks
// against req (protocol.AcceptPriceViolation), or "".
func priceViolation(r *rec, req *protocol.TaskRequest) string {
	if err := protocol.AcceptPriceViolation(r.accept(), req); err != nil {
		return protocol.CodeOf(err)
	}
	return ""
}

func firstValid(l []*rec, ok func(*rec) bool) *rec {
	for _, r := range l {
		if r.valid && ok(r) {
			return r
		}
	}
	return nil
}

// outcome is a consensus: verdict is passed, failed, disputed or "" (none).
type outcome struct {
	verdict string
	n, m    int      // counting verifiers; M of N threshold (high-stakes)
	counts  [3]int   // by verdictIndex
	weights [3]int64 // micro-units, high-stakes only
}

// step is a change of consensus caused by one verdict.
type step struct {
	r       *rec
	verdict string
}

// run is the replay of a task's verdicts in (created_at, id) order.
type run struct {
	final    outcome
	steps    []step
	latest   []*rec           // each verifier's counting verdict, by (created_at, id)
	latestBy map[uint32]*rec  // the same, by verifier
	weights  map[uint32]int64 // micro-unit weight per counting verifier
	score    *float64
}

var verdictOrder = [3]string{protocol.VerdictPassed, protocol.VerdictFailed, protocol.VerdictDisputed}

func verdictIndex(v string) int {
	switch v {
	case protocol.VerdictPassed:
		return 0
	case protocol.VerdictFailed:
		return 1
	}
	return 2
}

// replay folds d.verdicts in order, keeping each verifier's latest verdict,
// and records every change of consensus. weight is nil for ordinary tasks
// (unanimity, weight-free) and returns micro-unit weights for high-stakes.
func replay(d *derivation, weight func(agent uint32) int64) *run {
	ru := &run{}
	cur := make(map[uint32]*rec, len(d.verdicts))
	if weight != nil {
		ru.weights = make(map[uint32]int64, len(d.verdicts))
	}
	var o outcome
	for _, v := range d.verdicts {
		var w int64
		if weight != nil {
			var ok bool
			if w, ok = ru.weights[v.agent]; !ok {
				w = weight(v.agent)
				ru.weights[v.agent] = w
			}
			if w == 0 {
				continue // a verifier of no weight neither weighs nor counts
			}
		}
		if old := cur[v.agent]; old != nil {
			i := verdictIndex(old.verify().Verdict)
			o.counts[i]--
			o.weights[i] -= w
		} else {
			o.n++
		}
		cur[v.agent] = v
		i := verdictIndex(v.verify().Verdict)
		o.counts[i]++
		o.weights[i] += w
		prev := o.verdict
		o.verdict = decide(&o, weight != nil)
		if o.verdict != prev {
			ru.steps = append(ru.steps, step{r: v, verdict: o.verdict})
		}
	}
	o.verdict = decide(&o, weight != nil) // unchanged; sets m when no verdict counted
	ru.final = o
	ru.latestBy = cur
	for _, v := range d.verdicts {
		if cur[v.agent] == v {
			ru.latest = append(ru.latest, v)
		}
	}
	ru.score = consensusScore(ru, weight != nil)
	return ru
}

// decide applies the consensus rule to counts (and weights).
func decide(o *outcome, highStakes bool) string {
	if !highStakes {
		switch {
		case o.n == 0:
			return ""
		case o.counts[0] == o.n:
			return protocol.VerdictPassed
		case o.counts[1] == o.n:
			return protocol.VerdictFailed
		}
		return protocol.VerdictDisputed
	}
	o.m = max(3, (51*o.n+99)/100)
	best, tie := -1, false
	for i, w := range o.weights {
		switch {
		case w <= 0:
		case best < 0 || w > o.weights[best]:
			best, tie = i, false
		case w == o.weights[best]:
			tie = true
		}
	}
	if best < 0 || tie || o.counts[best] < o.m {
		return ""
	}
	return verdictOrder[best]
}

// consensusScore averages the scores of the counting verdicts: plain mean for
// ordinary tasks, weight-averaged for high-stakes, in (created_at, id) order
// with explicit conversions so no fused multiply-add changes the result.
func consensusScore(ru *run, highStakes bool) *float64 {
	var num, den float64
	for _, v := range ru.latest {
		vv := v.verify()
		if !vv.HasScore {
			continue
		}
		w := 1.0
		if highStakes {
			w = float64(ru.weights[v.agent])
		}
		num += float64(w * vv.Score)
		den += w
	}
	if den == 0 {
		return nil
	}
	s := round6(num / den)
	return &s
}

// round6 rounds to 1e-6, the precision of every float this package reports.
func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// finalOutcome is the consensus of d under w without the replay: each
// verifier's latest verdict, as the replay ends. It serves status filters
// and settlements; TestFinalOutcomeMatchesReplay holds the two together.
func (f *Fold) finalOutcome(d *derivation, w WeightFunc) outcome {
	if d.result == nil {
		return outcome{}
	}
	if d.fixed != nil {
		return d.fixed.final
	}
	var o outcome
	for _, v := range d.latest {
		q := quantize(w, f.names[v.agent])
		if q == 0 {
			continue
		}
		i := verdictIndex(v.verify().Verdict)
		o.n++
		o.counts[i]++
		o.weights[i] += q
	}
	o.verdict = decide(&o, true)
	return o
}

// consensusRun returns the replay for d: cached for ordinary tasks, computed
// under w for high-stakes ones.
func (f *Fold) consensusRun(d *derivation, w WeightFunc) *run {
	if d.result == nil {
		return &run{}
	}
	if d.fixed != nil {
		return d.fixed
	}
	return replay(d, func(agent uint32) int64 { return quantize(w, f.names[agent]) })
}

// timeline is a task's status at now and its transitions.
type timeline struct {
	status  Status
	verdict string       // verdict of the last entry (verified/disputed)
	history []Transition // nil unless asked for
	// expiry is the time after which the status changes by itself (a
	// deadline or a verification window); math.MaxInt64 when it never does.
	expiry int64
}

// buildTimeline is the status derivation. It emits the transitions in
// lifecycle order; the status is the last one. final is the consensus; steps
// are its changes, needed only for the history (without them the consensus
// enters in one step).
func (f *Fold) buildTimeline(t *task, d *derivation, final outcome, steps []step, now int64, withHistory bool) timeline {
	tl := timeline{expiry: math.MaxInt64}
	last := int64(math.MinInt64)
	emit := func(s Status, at int64, r *rec, verdict string) {
		if s == tl.status && verdict == tl.verdict {
			return
		}
		at = max(at, last)
		last = at
		tl.status, tl.verdict = s, verdict
		if withHistory {
			tr := Transition{Status: s, At: at, Verdict: verdict}
			if r != nil {
				tr.EventID = hexID(r.id)
			}
			tl.history = append(tl.history, tr)
		}
	}
	deadline := t.request.Deadline
	emit(StatusPending, t.req.at, t.req, "")
	if d.cancel != nil {
		if d.cancel.at > deadline && now > deadline {
			emit(StatusTimedOut, deadline, nil, "")
		}
		emit(StatusCancelled, d.cancel.at, d.cancel, "")
		return tl
	}
	p := d.payment
	if a := d.accept; a != nil && (d.result != nil || a.at <= deadline || now <= deadline) {
		emit(StatusAccepted, a.at, a, "")
	}
	if d.result == nil {
		tl.expiry = deadline
		if now > deadline && (p == nil || p.at > deadline) {
			emit(StatusTimedOut, deadline, nil, "")
		}
	} else {
		emit(StatusCompleted, d.result.at, d.result, "")
		if withHistory {
			for _, s := range steps {
				emit(statusOf(s.verdict), s.r.at, s.r, s.verdict)
			}
		} else if final.verdict != "" {
			emit(statusOf(final.verdict), d.result.at, nil, final.verdict)
		}
		if d.highStakes && final.verdict == "" {
			tl.expiry = d.windowEnd
			if now > d.windowEnd && (p == nil || p.at > d.windowEnd) {
				emit(StatusDisputed, d.windowEnd, nil, "")
			}
		}
	}
	if p != nil {
		tl.expiry = math.MaxInt64
		s := StatusPaid
		if p.payment().Disposition == protocol.DispositionRefund {
			s = StatusRefunded
		}
		emit(s, p.at, p, "")
	}
	return tl
}

func statusOf(verdict string) Status {
	switch verdict {
	case protocol.VerdictPassed, protocol.VerdictFailed:
		return StatusVerified
	case protocol.VerdictDisputed:
		return StatusDisputed
	}
	return StatusCompleted
}
