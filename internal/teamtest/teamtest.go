// Package teamtest builds catalog teams with limits for the tests of the
// packages that enforce them (edge, ratelimit), so each table reads as its
// limits and nothing else.
package teamtest

import (
	"time"

	"switchyard/catalog"
	"switchyard/config"
)

// Limits are a team's limits; zero means none.
type Limits struct {
	RPM, TPM, Par int64
	USD           float64
	Period        time.Duration // budget period
}

// Team is a team named name with limits l.
func Team(name string, l Limits) *catalog.Team {
	return &catalog.Team{Team: config.Team{
		Name: name, RPM: l.RPM, TPM: l.TPM, MaxParallel: l.Par,
		Budget: config.Budget{USD: l.USD, Period: config.Period{Every: l.Period}},
	}}
}

// Level is l as one level's limits (a key's, a user's), nil when l sets
// none.
func Level(l Limits) *config.Limits {
	if l == (Limits{}) {
		return nil
	}
	return &config.Limits{RPM: l.RPM, TPM: l.TPM, MaxParallel: l.Par,
		Budget: config.Budget{USD: l.USD, Period: config.Period{Every: l.Period}}}
}
