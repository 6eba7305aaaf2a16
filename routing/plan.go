package routing

import (
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"switchyard/catalog"
)

// ErrNoPool means the requested public model has no enabled deployment that
// serves the request's operation and profile (SPEC 2.6): the client gets 404
// model_not_found, and no fallback turns an absent model into one.
var ErrNoPool = errors.New("routing: the model has no enabled deployment for this request")

// Profile is what a request needs from a deployment (SPEC 7.5) and what the
// cost-aware strategies price it at.
type Profile struct {
	Op           catalog.Operation // 0 means chat
	Stream       bool
	PromptTokens int // estimated prompt tokens
	OutputTokens int // expected output tokens (max_tokens or routing.default_max_tokens)
	Tools        bool
	ImageSize    string // images only, "" any
}

// fits reports whether an enabled deployment serving the operation can serve
// the rest of the profile: context length, tools, image size.
func (pr *Profile) fits(d *catalog.Deployment) bool {
	if d.MaxContextTokens > 0 && pr.PromptTokens > d.MaxContextTokens {
		return false
	}
	if pr.Tools && !d.Tools {
		return false
	}
	if pr.ImageSize != "" && len(d.ImageSizes) > 0 {
		for _, s := range d.ImageSizes {
			if s == pr.ImageSize {
				return true
			}
		}
		return false
	}
	return true
}

// PlanInput is what the gateway knows when it starts routing a request.
type PlanInput struct {
	Snapshot *catalog.Snapshot
	Model    string // public model, after the tier rewrite
	Profile  Profile
	// Session is the detected session key, already scoped by team; "" none.
	Session string
	// SessionDeployment is the deployment currently pinned to the session
	// (from the session store); "" none. Honored only with session_keeping.
	SessionDeployment string
	MaxAttempts       int // max_attempts[operation][mode]; values below 1 mean 1
}

// Plan is one request's walk over its primary pool, its fallback chain and
// the global fallbacks, within one shared attempt budget (SPEC 7). The
// gateway calls Next, makes the attempt, and reports it with Attempt.Done,
// until Next says false; the plan never sleeps (retry_after is the
// gateway's). A Plan belongs to one request and is not safe for concurrent
// use.
type Plan struct {
	// Set by Router.Plan, immutable afterwards.
	r       *Router
	snap    *catalog.Snapshot
	primary string
	profile Profile
	session string
	pinIn   string // PlanInput.SessionDeployment
	pin     string // the pin to honor: pinIn with session keeping on, else ""
	budget  int
	tokens  int64 // estimated tokens charged against deployment quotas

	// Walk state.
	stage      stage
	model      *catalog.Model // the pool being walked
	fallback   bool           // model is a fallback, not the primary
	slots      []slot         // model's compatible deployments
	chain      []string       // the (primary, reason) chain, once decided
	walk       int            // next index into chain ++ snap.Global
	reason     catalog.Reason // decided once, when the primary pool is exhausted
	failures   int            // failures observed in the primary pool
	allCW      bool           // ... all of them context_window
	allCP      bool           // ... all of them content_policy
	announced  string         // the fallback model OnFallback was last sent for
	pinChecked bool
	affinity   string
	pinCooling bool // the honored pin's deployment was cooling after its last attempt
	pinKept    bool // the pin's deployment was over its quota, not cooling: the session keeps it
	warm       string
	warmDone   bool
	lastResort lastResort
	wait       time.Duration // shortest cooldown or quota wait observed
	pending    *Attempt
	finished   bool
	served     *Attempt
	attempts   []Attempt
	timeline   []AttemptRecord

	// Selection: the plan's own random source and scratch.
	pcg   rand.PCG
	rnd   rand.Rand
	pick  Pick
	cands []Candidate

	// Inline backing arrays: a typical request allocates only the Plan.
	slotBuf  [6]slot
	candBuf  [6]Candidate
	floatBuf [12]float64
	attBuf   [2]Attempt
	recBuf   [2]AttemptRecord
}

type stage uint8

const (
	stagePool       stage = iota // walking p.model's pool
	stageLastResort              // every model walked
	stageDone
)

// slot is one compatible deployment of the pool being walked.
type slot struct {
	d         *catalog.Deployment
	st        *DeploymentState
	exhausted bool  // a non-retryable outcome: not tried again in this request
	inPass    bool  // tried in the current pass
	rejected  uint8 // reject reasons already reported for it
}

const (
	rejectedCooldown uint8 = 1 << iota
	rejectedQuota
)

// lastResort is the cooling deployment whose cooldown ends first.
type lastResort struct {
	d        *catalog.Deployment
	st       *DeploymentState
	model    string
	fallback bool
	until    int64
}

// Attempt is one upstream call the gateway is to make. Its exported fields
// are read-only.
type Attempt struct {
	Deployment *catalog.Deployment
	Model      string    // the public model whose pool it came from
	Fallback   bool      // Model is a fallback of the requested model
	LastResort bool      // every candidate was cooling down: the one last-resort try
	Probe      bool      // a recovery probe on a cooling deployment
	Session    bool      // the session's deployment pin, honored
	N          int       // 1-based attempt number within the request
	Start      time.Time // when it was handed out

	plan   *Plan
	state  *DeploymentState
	slot   int   // index in plan.slots, -1 for the last resort
	tick   int64 // Start on the router's timeline
	stamp  int64 // where the UsageSource counted it (when hasQuota)
	stream bool
	done   bool
}

// AttemptRecord is one attempt in the timeline (SPEC 7.6, audit 12.2).
type AttemptRecord struct {
	Deployment string        `json:"deployment"`
	Model      string        `json:"model"`
	Adapter    string        `json:"adapter"`   // provider kind
	Transport  string        `json:"transport"` // "http" or "stream"
	Start      time.Time     `json:"start"`
	Duration   time.Duration `json:"duration"`
	Status     int           `json:"status"`
	Class      Class         `json:"class"`
	Error      string        `json:"error,omitempty"`
	Fallback   bool          `json:"fallback,omitempty"`
	Probe      bool          `json:"probe,omitempty"`
	LastResort bool          `json:"last_resort,omitempty"`
}

// PlanResult is what a plan decided, for the response headers and the audit.
type PlanResult struct {
	Timeline []AttemptRecord // every attempt in order; shares the plan's memory
	// Reason is the fallback reason decided when the primary pool was
	// exhausted; "" if it never was.
	Reason     catalog.Reason
	Degraded   bool // a fallback model served
	Attempts   int
	RetryAfter time.Duration // nothing served: the shortest remaining cooldown or quota wait seen, 0 if none
	Served     *catalog.Deployment
	// SessionDeployment is the deployment the session should be pinned to
	// now (SPEC 8): a honored pin stays while its deployment is not in
	// cooldown, even when its attempt failed and another deployment served;
	// otherwise the one that served, else the pin the plan was given.
	SessionDeployment string
	Affinity          string // AffinityHonored, AffinityReleased, or "" when there was no pin in the pool or its deployment was only over quota (the pin is kept)
}

// planPool recycles the plans callers Release: with its inline arrays a
// plan is 1.5 KB, a request's second largest allocation.
var planPool = sync.Pool{New: func() any { return new(Plan) }}

// Release hands p back for reuse once its request is over. Neither p, its
// Attempts nor a PlanResult's Timeline may be used afterwards. A plan
// never released is simply collected.
func (p *Plan) Release() {
	*p = Plan{} // holds nothing of its request (snapshot, session) while pooled
	planPool.Put(p)
}

// Plan starts routing one request. It returns ErrNoPool when the primary
// model is unknown or none of its enabled deployments serves the request's
// operation and profile. The caller may Release the plan when done.
func (r *Router) Plan(in PlanInput) (*Plan, error) {
	if in.Snapshot == nil {
		return nil, ErrNoPool
	}
	m := in.Snapshot.Model(in.Model)
	if m == nil {
		return nil, ErrNoPool
	}
	p := planPool.Get().(*Plan)
	*p = Plan{
		r:       r,
		snap:    in.Snapshot,
		primary: in.Model,
		profile: in.Profile,
		session: in.Session,
		pinIn:   in.SessionDeployment,
		budget:  max(in.MaxAttempts, 1),
		tokens:  int64(max(in.Profile.PromptTokens, 0) + max(in.Profile.OutputTokens, 0)),
		allCW:   true,
		allCP:   true,
	}
	if p.profile.Op == 0 {
		p.profile.Op = catalog.OpChat
	}
	if r.cfg.SessionKeeping {
		p.pin = in.SessionDeployment
	}
	p.slots, p.cands = p.slotBuf[:0], p.candBuf[:0]
	p.attempts, p.timeline = p.attBuf[:0], p.recBuf[:0]
	if !p.enter(m, false) {
		p.Release()
		return nil, ErrNoPool
	}
	p.pcg.Seed(r.seed, r.plans.Add(1))
	p.rnd = *rand.New(&p.pcg)
	p.pick = Pick{Profile: p.profile, Rand: &p.rnd, decay: int64(r.cfg.EWMADecay), scratch: p.floatBuf[:0]}
	return p, nil
}

// Next returns the next attempt to make, or false when the request is over:
// an attempt succeeded or the client went away, the budget is spent, or the
// primary pool, the chain and the global fallbacks have nothing left. The
// previous Attempt must be Done before Next is called again.
func (p *Plan) Next() (*Attempt, bool) {
	if p.pending != nil {
		panic("routing: Plan.Next called before the previous Attempt's Done")
	}
	if p.finished || len(p.attempts) >= p.budget {
		p.finished = true
		return nil, false
	}
	now := p.r.clock.Now()
	t := p.r.tick(now)
	for {
		switch p.stage {
		case stagePool:
			if a := p.nextInPool(now, t); a != nil {
				return a, true
			}
			p.r.obs.OnReject(RejectExhausted)
			if !p.fallback {
				p.decideReason()
			}
			p.nextModel()
		case stageLastResort:
			p.stage = stageDone
			if a := p.tryLastResort(now, t); a != nil {
				return a, true
			}
		default:
			p.finished = true
			return nil, false
		}
	}
}

// Done reports the attempt's outcome: it updates the deployment's live
// state (in-flight, latency estimate, streak, cooldown, probe slot),
// notifies the Observer and advances the plan. It must be called exactly
// once per Attempt; later calls are ignored.
func (a *Attempt) Done(o Outcome) {
	if a.done || a.plan == nil {
		return
	}
	a.done = true
	p := a.plan
	now := p.r.clock.Now()
	t := p.r.tick(now)
	p.r.complete(a, o, t)
	if p.affinity == AffinityHonored && a.Deployment.ID == p.pin && !a.Fallback {
		p.pinCooling = a.state.coolingAt(t)
	}
	rec := &p.timeline[a.N-1]
	rec.Duration = o.Latency
	if rec.Duration <= 0 {
		rec.Duration = now.Sub(a.Start)
	}
	rec.Status, rec.Class, rec.Error = o.Status, o.Class, o.Message
	if p.pending == a {
		p.pending = nil
	}
	switch o.Class {
	case ClassOK:
		p.served, p.finished = a, true
		if p.session != "" {
			p.r.warm.put(p.session, a.Deployment.ID, t, int64(p.r.cfg.WarmCacheTTL))
		}
		return
	case ClassCanceled:
		p.finished = true
		return
	}
	if !a.Fallback && !a.LastResort {
		p.failures++
		p.allCW = p.allCW && o.Class == ClassContextWindow
		p.allCP = p.allCP && o.Class == ClassContentPolicy
	}
	if a.slot >= 0 {
		s := &p.slots[a.slot]
		s.inPass = true
		s.exhausted = s.exhausted || !o.Class.Retryable()
	}
}

// Withdraw takes back the attempt Next just handed out, which the gateway
// gives up before sending: the retry_after wait before it would pass the
// request's deadline, or the request ended during that wait (SPEC 7.1). It
// was never an attempt of the request, so it leaves no trace in the plan's
// count or timeline (X-Switchyard-Attempts counts attempts sent, SPEC 12.3)
// and no outcome on the deployment; its in-flight count, probe slot and
// count against the deployment's quota (SPEC 5) are given back, and the
// plan is over. It must be the plan's latest attempt and
// not Done; otherwise, or called twice, it does nothing.
func (a *Attempt) Withdraw() {
	p := a.plan
	if a.done || p == nil || p.pending != a || a.N != len(p.attempts) {
		return
	}
	a.done = true
	p.pending, p.finished = nil, true
	a.state.inflight.Add(-1)
	if !a.stream {
		a.state.awaiting.Add(-1)
	}
	if a.Probe {
		a.state.releaseProbe()
	}
	if hasQuota(a.Deployment) {
		p.r.usage.Unrecord(a.Deployment.ID, p.tokens, a.stamp)
	}
	p.attempts = p.attempts[:a.N-1]
	p.timeline = p.timeline[:a.N-1]
}

// SessionDeployment is PlanResult.SessionDeployment without the rest of
// the result: the deployment the session is to be pinned to now.
func (p *Plan) SessionDeployment() string {
	if p.served == nil {
		return p.pinIn
	}
	if (p.affinity == AffinityHonored && !p.pinCooling) || p.pinKept {
		// The pinned attempt failed without its deployment entering
		// cooldown (a transient 500, a context-window error), or the
		// pinned deployment was only over its quota: the request went
		// elsewhere, the session keeps its pin (SPEC 8: released only when
		// its deployment enters cooldown).
		return p.pin
	}
	return p.served.Deployment.ID
}

// Result reports what the plan did so far; call it after the last Next.
func (p *Plan) Result() PlanResult {
	res := PlanResult{
		Timeline:          p.timeline,
		Reason:            p.reason,
		Attempts:          len(p.attempts),
		SessionDeployment: p.SessionDeployment(),
		Affinity:          p.affinity,
	}
	if p.served != nil {
		res.Served = p.served.Deployment
		res.Degraded = p.served.Model != p.primary
	} else {
		res.RetryAfter = p.wait
	}
	return res
}

// decideReason fixes the fallback reason from the primary pool's failures
// (SPEC 7.3) and looks up its exact chain: no other reason stands in.
func (p *Plan) decideReason() {
	switch {
	case p.failures > 0 && p.allCW:
		p.reason = catalog.ReasonContextWindow
	case p.failures > 0 && p.allCP:
		p.reason = catalog.ReasonContentPolicy
	default:
		p.reason = catalog.ReasonGeneral
	}
	p.chain = p.snap.Chain(p.primary, p.reason)
}
