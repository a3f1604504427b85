package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The shape of a kind 22 capacity report (seed §13.7.2), read by the
// funding view; kind 22 has no publish rule.

// CapacityItem is one upgrade or backlog entry of a kind 22.
type CapacityItem struct {
	Date    string `json:"date,omitempty"`
	Item    string `json:"item"`
	CostUSD string `json:"cost_usd,omitempty"`
	// EstimatedUSD is a backlog entry's estimate.
	EstimatedUSD string `json:"estimated_usd,omitempty"`
}

// CapacityReport is the parsed content of a kind 22 capacity report
// (§13.7.2).
type CapacityReport struct {
	Period               string
	DonationsReceivedUSD string
	InfraCostsUSD        string
	Upgrades             []CapacityItem
	Backlog              []CapacityItem
	// Capacity holds the capacity object's members as published.
	Capacity map[string]json.RawMessage
}

// capacityFigures are §13.7.2's capacity members; when present each must
// be a non-negative number.
var capacityFigures = []string{"max_req_per_sec", "current_active_agents", "storage_gb"}

// ParseCapacity checks a kind 22's content against §13.7.2's shape and
// returns every problem as "<JSON path>: <what is wrong>" (the report is
// nil when there is any). Required: period ("<start>..<end>"),
// donations_received_usd and infra_costs_usd (non-negative decimals),
// upgrades (array of {date, item, cost_usd}), capacity (object; its
// max_req_per_sec, current_active_agents and storage_gb, when present,
// non-negative numbers; other members are free), backlog (array of {item,
// estimated_usd}). Kind 22 is not checked at publish: the view judges it.
func ParseCapacity(content string) (*CapacityReport, []string) {
	obj, ok := decodeObject(content)
	if !ok {
		return nil, []string{"content: must be one JSON object"}
	}
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	r := &CapacityReport{}
	r.Period, _ = jsonString(obj["period"])
	if from, to, found := strings.Cut(r.Period, ".."); !found || from == "" || to == "" {
		bad("content.period: must be \"<start>..<end>\"")
	}
	for _, m := range []struct {
		name string
		dst  *string
	}{{"donations_received_usd", &r.DonationsReceivedUSD}, {"infra_costs_usd", &r.InfraCostsUSD}} {
		if *m.dst, ok = jsonDecimal(obj[m.name]); !ok {
			bad("content.%s: must be a non-negative decimal", m.name)
		}
	}
	r.Upgrades = capacityItems(obj, "upgrades", "cost_usd", bad)
	r.Backlog = capacityItems(obj, "backlog", "estimated_usd", bad)
	if r.Capacity, ok = jsonObject(obj["capacity"]); !ok {
		bad("content.capacity: must be an object")
	}
	for _, k := range capacityFigures {
		if raw, has := r.Capacity[k]; has {
			if f, ok := jsonFloat(raw); !ok || f < 0 {
				bad("content.capacity.%s: must be a non-negative number", k)
			}
		}
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return r, nil
}

func capacityItems(obj map[string]json.RawMessage, name, amount string, bad func(string, ...any)) []CapacityItem {
	var arr []json.RawMessage
	if raw := obj[name]; len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &arr) != nil {
		bad("content.%s: must be an array", name)
		return nil
	}
	out := make([]CapacityItem, 0, len(arr))
	for i, raw := range arr {
		it, ok := jsonObject(raw)
		if !ok {
			bad("content.%s[%d]: must be an object", name, i)
			continue
		}
		var c CapacityItem
		if c.Item, ok = jsonString(it["item"]); !ok || c.Item == "" {
			bad("content.%s[%d].item: must be a non-empty string", name, i)
		}
		d, ok := jsonDecimal(it[amount])
		if !ok {
			bad("content.%s[%d].%s: must be a non-negative decimal", name, i, amount)
		}
		if name == "upgrades" {
			c.CostUSD = d
			if c.Date, ok = jsonString(it["date"]); !ok {
				bad("content.%s[%d].date: must be a string", name, i)
			}
		} else {
			c.EstimatedUSD = d
		}
		out = append(out, c)
	}
	return out
}
