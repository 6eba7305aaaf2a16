package catalog

import (
	"sort"

	"switchyard/config"
)

// Chain is one fallback chain in the admin API's JSON shape (SPEC 11).
type Chain struct {
	PrimaryModel   string   `json:"primaryModel"`
	Reason         string   `json:"reason"`
	FallbackModels []string `json:"fallbackModels"`
}

// State is the admin-managed part of the catalog: what a Store persists.
// The config file seeds it once; afterwards the store is the truth.
type State struct {
	Version     int64               `json:"version"`
	Deployments []config.Deployment `json:"deployments"`
	Fallbacks   []Chain             `json:"fallbacks"`
}

// SeedState builds the first State from the configuration file.
func SeedState(cfg *config.Config) *State {
	st := &State{Version: 1, Deployments: append([]config.Deployment(nil), cfg.Deployments...)}
	for _, f := range cfg.Routing.Fallbacks {
		st.Fallbacks = append(st.Fallbacks, Chain{PrimaryModel: f.Primary, Reason: f.Reason, FallbackModels: append([]string(nil), f.Models...)})
	}
	st.normalize()
	return st
}

// Clone returns a deep copy that a mutation may change freely.
func (s *State) Clone() *State {
	c := &State{Version: s.Version, Deployments: make([]config.Deployment, len(s.Deployments)), Fallbacks: make([]Chain, len(s.Fallbacks))}
	copy(c.Deployments, s.Deployments)
	for i, f := range s.Fallbacks {
		c.Fallbacks[i] = Chain{f.PrimaryModel, f.Reason, append([]string(nil), f.FallbackModels...)}
	}
	return c
}

// normalize sorts deployments by id and chains by key, so equal states
// serialize equally.
func (s *State) normalize() {
	sort.Slice(s.Deployments, func(i, j int) bool { return s.Deployments[i].ID < s.Deployments[j].ID })
	sort.Slice(s.Fallbacks, func(i, j int) bool {
		a, b := s.Fallbacks[i], s.Fallbacks[j]
		if a.PrimaryModel != b.PrimaryModel {
			return a.PrimaryModel < b.PrimaryModel
		}
		return a.Reason < b.Reason
	})
}

// ModelOps maps each public model to the operations of all its persisted
// deployments, disabled ones included (SPEC 11: disabling is temporary).
func (s *State) ModelOps() map[string][]string {
	m := map[string][]string{}
	for _, d := range s.Deployments {
		m[d.Model] = append(m[d.Model], d.Operations...)
	}
	return m
}
