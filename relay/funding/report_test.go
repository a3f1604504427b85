package funding_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/funding"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

type capacityAnswer struct {
	Operators int `json:"operators"`
	Count     int `json:"count"`
	Reports   []struct {
		Operator  string          `json:"operator"`
		EventID   string          `json:"event_id"`
		CreatedAt int64           `json:"created_at"`
		Valid     bool            `json:"valid"`
		Problems  []string        `json:"problems"`
		Content   json.RawMessage `json:"content"`
	} `json:"reports"`
}

// TestOperatorReport: the relay's operator agent publishes, on the
// relay's clock, a capacity report signed by the relay key with figures
// it measured, and GET /capacity lists it beside other operators' latest
// reports, judged against §13.7.2.
func TestOperatorReport(t *testing.T) {
	op := taskstest.NewAgent("relay-operator")
	decl := `{"addresses":[{"chain":"eth","address":"` + ethAddr + `"}],"purpose":"relay hosting"}`
	m := funding.NewModule(funding.Options{Report: funding.ReportOptions{Every: 24 * time.Hour, Tick: 5 * time.Millisecond, InfraCostsUSD: "12.50", Funding: decl}})
	r := relaytest.Start(t, []relay.Module{m}, func(c *relay.Config) { c.RelayKey = op.Key })
	at := int64(relaytest.VectorTime)
	a := taskstest.Pool(4)
	donor, other, stranger := a[0], a[1], a[2]
	evs := []*protocol.Event{
		op.Sign(protocol.KindRelayAnnounce, at, map[string]any{"url": r.URL}),
		donor.Sign(protocol.KindDonation, at, map[string]any{"type": "sent", "chain": "ETH", "tx_hash": tx(4), "amount": "25", "asset": "USDC"},
			[]string{"p", op.ID}, []string{"chain", "ETH"}),
		donor.Sign(protocol.KindDonation, at+1, map[string]any{"type": "sent", "chain": "ETH", "tx_hash": tx(5), "amount": "999", "asset": "USDC", "private": true},
			[]string{"p", op.ID}, []string{"chain", "ETH"}),
		other.Sign(protocol.KindRelayAnnounce, at, map[string]any{"url": "https://other.example"}),
		// another operator's older and newer reports; the newer has a bad shape
		other.Sign(protocol.KindCapacity, at-7200, map[string]any{"period": "a..b", "donations_received_usd": "1.00", "infra_costs_usd": "0",
			"upgrades": []any{}, "capacity": map[string]any{}, "backlog": []any{}}),
		other.Sign(protocol.KindCapacity, at-3600, map[string]any{"period": "2026-05-01", "donations_received_usd": "lots",
			"upgrades": []any{map[string]any{"item": "RAM"}}, "capacity": map[string]any{"storage_gb": -1}, "backlog": []any{}}),
		// a kind 22 from an agent that announced no relay is not listed
		stranger.Sign(protocol.KindCapacity, at, map[string]any{"period": "a..b"}),
	}
	for i := range 5 {
		evs = append(evs, other.Sign(protocol.KindPost, at+int64(i), "busy"))
	}
	// The operator agent declares its address (§13.7.1) when it starts.
	relaytest.Eventually(t, "the operator's kind 16", func() bool {
		f, _ := getFunding(t, r, "/funding/"+op.ID)
		return len(f.Addresses) == 1 && f.Addresses[0].Chain == "ETH"
	})
	r.PostAll(t, evs, 1)
	var c capacityAnswer
	get := func() {
		t.Helper()
		ans := r.Do(t, "GET", "/capacity", "", nil)
		if ans.Status != 200 {
			t.Fatalf("GET /capacity: %d %s", ans.Status, ans.Body)
		}
		c = capacityAnswer{}
		if err := json.Unmarshal(ans.Body, &c); err != nil {
			t.Fatal(err)
		}
	}
	get()
	if c.Operators != 2 || c.Count != 1 || c.Reports[0].Operator != other.ID || c.Reports[0].Valid || c.Reports[0].CreatedAt != at-3600 {
		t.Fatalf("before the period: %+v", c)
	}
	probs := strings.Join(c.Reports[0].Problems, "\n")
	for _, want := range []string{"content.period", "content.donations_received_usd", "content.infra_costs_usd", "content.upgrades[0].cost_usd", "content.upgrades[0].date", "content.capacity.storage_gb"} {
		if !strings.Contains(probs, want) {
			t.Fatalf("problems %q do not name %s", probs, want)
		}
	}
	r.Clock.Add(24 * time.Hour)
	relaytest.Eventually(t, "the operator's report", func() bool { get(); return c.Count == 2 })
	var mine struct {
		Period    string `json:"period"`
		Donations string `json:"donations_received_usd"`
		Costs     string `json:"infra_costs_usd"`
		Capacity  struct {
			Peak    int64   `json:"peak_events_per_sec"`
			P99     int64   `json:"p99_events_per_sec"`
			Active  int     `json:"current_active_agents"`
			Storage float64 `json:"storage_gb"`
			Events  int64   `json:"total_events"`
		} `json:"capacity"`
	}
	rep := c.Reports[0]
	if rep.Operator != op.ID {
		rep = c.Reports[1]
	}
	if err := json.Unmarshal(rep.Content, &mine); err != nil {
		t.Fatal(err)
	}
	// Every event (and the operator's kind 16) was committed in one second
	// of the relay's clock: the peak is all of them; over a day of quiet
	// seconds the 99th percentile is zero. Four agents published; the
	// private 999 stays out.
	if !rep.Valid || rep.CreatedAt != at+86400 || mine.Capacity.Peak != int64(len(evs))+1 || mine.Capacity.P99 != 0 ||
		mine.Capacity.Active != 4 || mine.Capacity.Events != int64(len(evs))+1 || mine.Capacity.Storage <= 0 ||
		mine.Donations != "25.00" || mine.Costs != "12.50" || mine.Period != "2025-11-22T08:26:40Z..2025-11-23T08:26:40Z" {
		t.Fatalf("the operator's report: %+v %s", rep, rep.Content)
	}
	// It is a stored event signed by the relay key, like any other.
	stored := r.Do(t, "GET", "/events/"+rep.EventID, "", nil).JSON(t)
	if stored["agent_id"] != op.ID || stored["kind"] != float64(protocol.KindCapacity) {
		t.Fatalf("stored report: %v", stored)
	}
	// The next report covers the next period, from where this one ended.
	r.Clock.Add(24 * time.Hour)
	relaytest.Eventually(t, "the second report", func() bool {
		get()
		return c.Reports[0].CreatedAt == at+2*86400 || c.Reports[1].CreatedAt == at+2*86400
	})
	if n := r.Count(t); n != int64(len(evs))+3 {
		t.Fatalf("%d events after two periods, want %d", n, len(evs)+3)
	}
	rep = c.Reports[0]
	if rep.Operator != op.ID {
		rep = c.Reports[1]
	}
	json.Unmarshal(rep.Content, &mine)
	if mine.Period != "2025-11-23T08:26:40Z..2025-11-24T08:26:40Z" || mine.Capacity.Active != 1 || mine.Capacity.Peak != 1 || mine.Donations != "0.00" {
		t.Fatalf("the second report: %s", rep.Content)
	}
}

func TestReportOptionsValidate(t *testing.T) {
	for _, o := range []funding.ReportOptions{
		{InfraCostsUSD: "-1"}, {InfraCostsUSD: "12,50"}, {Every: -time.Hour},
		{Funding: `{"addresses":[{"chain":"BTC","address":"bc1qnotanaddress"}]}`}, {Funding: `{}`},
	} {
		if o.Validate() == nil {
			t.Errorf("%+v validates", o)
		}
	}
	ok := funding.ReportOptions{Every: time.Hour, InfraCostsUSD: "180.00", Funding: `{"addresses":[{"chain":"BTC","address":"` + btcAddr + `"},{"chain":"btc","address":"1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"}]}`}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	e, _ := funding.FundingEvent(ok.Funding, 1)
	if len(e.Tags) != 1 || e.Tags[0][1] != "BTC" {
		t.Fatalf("tags %v", e.Tags)
	}
}
