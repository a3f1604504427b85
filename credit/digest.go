package credit

import "github.com/anp2net/relay/tasks"

// DigestVersion names the canonical serialization Digest hashes.
const DigestVersion = "credit.v1"

type digestAccount struct {
	AgentID               string `json:"agent_id"`
	Balance               string `json:"balance"`
	Locked                string `json:"locked"`
	Available             string `json:"available"`
	VerifiedProviderTasks int64  `json:"verified_provider_tasks"`
}

// Digest returns SHA-256 over the RFC 8785 (JCS) serialization of every
// non-zero account at time now under w: {"version", "now", "treasury",
// "accounts": [...by agent_id]}, amounts as decimal strings so that values
// beyond 2^53 stay exact.
func (l *Ledger) Digest(now int64, w tasks.WeightFunc) [32]byte {
	accounts := l.Accounts(now, w)
	doc := struct {
		Version  string          `json:"version"`
		Now      int64           `json:"now"`
		Treasury string          `json:"treasury"`
		Accounts []digestAccount `json:"accounts"`
	}{Version: DigestVersion, Now: now, Treasury: l.treasury, Accounts: make([]digestAccount, len(accounts))}
	for i, a := range accounts {
		doc.Accounts[i] = digestAccount{a.AgentID, a.Balance.String(), a.Locked.String(), a.Available.String(), a.VerifiedProviderTasks}
	}
	return tasks.CanonicalDigest(doc)
}
