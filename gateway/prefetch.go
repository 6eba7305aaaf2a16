package gateway

import (
	"github.com/redis/go-redis/v9"

	"switchyard/ratelimit"
	"switchyard/sessions"
)

// prefetcher puts the edge-limit script and the session pin reads of a
// request into one Redis pipeline: at most one round trip before the
// upstream call (SPEC 9). It exists only in cluster mode; local mode reads
// memory and needs none.
type prefetcher struct {
	limiter *ratelimit.Redis
	pins    *sessions.Redis
}

// pinRead is one prefetched pin.
type pinRead struct {
	model string // "" for the tier pin
	value string
	ok    bool
}

// prefetched is what the prefetch stage learned; later stages read it
// instead of asking Redis again.
type prefetched struct {
	done     bool
	admitted bool // the edge decision below is valid
	decision ratelimit.Decision
	err      error
	tier     pinRead
	haveTier bool
	deps     [2]pinRead
	nDeps    int
}

func (p *prefetched) dep(model string) (string, bool, bool) {
	for i := 0; i < p.nDeps; i++ {
		if p.deps[i].model == model {
			return p.deps[i].value, p.deps[i].ok, true
		}
	}
	return "", false, false
}

// prefetch runs after authentication: it works out which pins the request
// may need (its tier pin, and the deployment pin of each model it may be
// routed to) and sends them with the admission in one pipeline.
func (cl *call) prefetch() bool {
	s := cl.s
	if s.prefetch == nil {
		return true
	}
	pf := &cl.pre
	route := cl.snap.Routes[cl.req.Model]
	models := [2]string{cl.req.Model}
	nModels := 1
	if route != nil {
		models, nModels = [2]string{route.Easy, route.Hard}, 2
		if route.Easy == route.Hard {
			nModels = 1
		}
	}
	var tierKey string
	var depKeys [2]string
	session := ""
	if route != nil || cl.pinsDeployment(models[0]) || (nModels > 1 && cl.pinsDeployment(models[1])) {
		session = cl.sessionKey()
	}
	if session != "" {
		if route != nil {
			tierKey = sessions.ScopedKey(session, "tier:"+route.Alias)
		}
		for i := 0; i < nModels; i++ {
			if cl.pinsDeployment(models[i]) {
				depKeys[i] = sessions.ScopedKey(session, "dep:"+models[i])
			}
		}
	}
	limited := limitedTeam(cl)
	if !limited && tierKey == "" && depKeys[0] == "" && depKeys[1] == "" {
		return true
	}
	var tierLookup sessions.Lookup
	var depLookups [2]sessions.Lookup
	queue := func(p redis.Pipeliner) {
		if tierKey != "" {
			tierLookup = s.prefetch.pins.QueueTier(cl.ctx, p, tierKey)
		}
		for i, k := range depKeys {
			if k != "" {
				depLookups[i] = s.prefetch.pins.QueueDeployment(cl.ctx, p, k)
			}
		}
	}
	if tierKey == "" && depKeys[0] == "" && depKeys[1] == "" {
		queue = nil // the admission alone: a plain EVALSHA, no pipeline
	}
	a := ratelimit.Admission{RequestID: cl.reqID, Team: cl.team, Tokens: int64(cl.promptTokens + cl.outputTokens)}
	pf.decision, pf.err = s.prefetch.limiter.AdmitWith(cl.ctx, a, queue)
	pf.admitted, pf.done = limited, true
	if tierLookup != nil {
		pf.tier.value, pf.tier.ok = tierLookup()
		pf.haveTier = true
	}
	for i, l := range depLookups {
		if l != nil {
			v, ok := l()
			pf.deps[pf.nDeps] = pinRead{model: models[i], value: v, ok: ok}
			pf.nDeps++
		}
	}
	return true
}

func limitedTeam(cl *call) bool {
	t := cl.team
	return t.RPM > 0 || t.TPM > 0 || t.MaxParallel > 0 || t.Budget.USD > 0
}
