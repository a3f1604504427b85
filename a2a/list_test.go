package a2a_test

import (
	"slices"
	"testing"

	"github.com/anp2net/relay/a2a"
	"github.com/anp2net/relay/tasks"
)

type listAnswer struct {
	Tasks          []a2a.Task `json:"tasks"`
	PageSize       int        `json:"page_size"`
	PageSizeCamel  int        `json:"pageSize"`
	NextPageToken  string     `json:"next_page_token"`
	NextTokenCamel string     `json:"nextPageToken"`
}

func ids(ts []a2a.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func TestList(t *testing.T) {
	r := startRelay(t)
	byStatus := map[tasks.Status]string{}
	var newestFirst []string // lifecycle requests are created further back each time
	for _, tc := range projectionTable {
		evs := lifecycle(t, tc.native)
		r.publish(t, evs...)
		byStatus[tc.native] = evs[0].ID
		newestFirst = append(newestFirst, evs[0].ID)
	}
	list := func(params map[string]any) listAnswer {
		t.Helper()
		var a listAnswer
		call(t, r.base, "tasks/list", params).result(t, &a)
		if a.PageSize != a.PageSizeCamel || a.NextPageToken != a.NextTokenCamel {
			t.Errorf("spellings disagree: %+v", a)
		}
		return a
	}

	all := list(nil)
	if got := ids(all.Tasks); !slices.Equal(got, newestFirst) || all.PageSize != 50 || all.NextPageToken != "" {
		t.Errorf("default list: %v (page %d, next %q), want %v", got, all.PageSize, all.NextPageToken, newestFirst)
	}
	for _, task := range all.Tasks {
		if task.History != nil || task.Artifacts != nil {
			t.Errorf("default list carries history or artifacts: %+v", task)
		}
	}

	t.Run("pages", func(t *testing.T) {
		for _, names := range [][3]string{{"limit", "page_token", "snake"}, {"page_size", "page_token", "snake"}, {"pageSize", "pageToken", "camel"}} {
			var got []string
			params := map[string]any{names[0]: 4}
			for range 5 {
				page := list(params)
				if len(page.Tasks) > 4 || page.PageSize != 4 {
					t.Fatalf("%v: page of %d (size %d)", names, len(page.Tasks), page.PageSize)
				}
				got = append(got, ids(page.Tasks)...)
				if page.NextPageToken == "" {
					break
				}
				params = map[string]any{names[0]: 4, names[1]: page.NextPageToken}
			}
			if !slices.Equal(got, newestFirst) {
				t.Errorf("%v: pages %v, want %v", names, got, newestFirst)
			}
		}
	})

	t.Run("filters", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			params map[string]any
			want   []tasks.Status
		}{
			{"A2A status working", map[string]any{"status": "working"}, []tasks.Status{tasks.StatusAccepted, tasks.StatusCompleted, tasks.StatusVerified}},
			{"A2A status, enum spelling", map[string]any{"status": "TASK_STATE_FAILED"}, []tasks.Status{tasks.StatusRefunded, tasks.StatusDisputed, tasks.StatusTimedOut}},
			{"A2A status completed is native paid", map[string]any{"status": "completed"}, []tasks.Status{tasks.StatusPaid}},
			{"native state completed", map[string]any{"state": "completed"}, []tasks.Status{tasks.StatusCompleted}},
			{"state given an A2A value", map[string]any{"state": "canceled"}, []tasks.Status{tasks.StatusCancelled}},
			{"A2A state no native task has", map[string]any{"status": "input-required"}, nil},
			{"union with a limit", map[string]any{"status": "failed", "limit": 2}, []tasks.Status{tasks.StatusRefunded, tasks.StatusDisputed}},
			{"capability", map[string]any{"capability": "transform.text.demo", "state": "pending"}, []tasks.Status{tasks.StatusPending}},
			{"other capability", map[string]any{"capability": "summarize.research.ml"}, nil},
			{"provider", map[string]any{"provider": provider.ID, "status": "failed"}, []tasks.Status{tasks.StatusRefunded, tasks.StatusDisputed}},
			{"requester", map[string]any{"requester": provider.ID}, nil},
			{"contextId", map[string]any{"contextId": byStatus[tasks.StatusVerified]}, []tasks.Status{tasks.StatusVerified}},
			{"context_id and a filter it fails", map[string]any{"context_id": byStatus[tasks.StatusVerified], "state": "paid"}, nil},
			{"metadata and tenant ignored", map[string]any{"state": "paid", "metadata": map[string]any{"x": 1}, "tenant": "t"}, []tasks.Status{tasks.StatusPaid}},
		} {
			var want []string
			for _, s := range tc.want {
				want = append(want, byStatus[s])
			}
			if got := ids(list(tc.params).Tasks); !slices.Equal(got, want) {
				t.Errorf("%s: %v, want %v", tc.name, got, want)
			}
		}
	})

	t.Run("history and artifacts", func(t *testing.T) {
		page := list(map[string]any{"state": "paid", "history_length": 1, "include_artifacts": true})
		task := page.Tasks[0]
		if len(task.History) != 1 || task.History[0].Parts[1].Data["anp2_status"] != "paid" || len(task.Artifacts) != 1 {
			t.Errorf("history_length 1 + include_artifacts: %+v", task)
		}
		page = list(map[string]any{"state": "paid", "historyLength": 10, "includeArtifacts": false})
		if task := page.Tasks[0]; len(task.History) != 5 || task.Artifacts != nil {
			t.Errorf("historyLength 10: %d entries, artifacts %v", len(task.History), task.Artifacts)
		}
	})
}
