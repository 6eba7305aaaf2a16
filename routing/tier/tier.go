// Package tier is the smart tier classifier of SPEC 4: it decides, in
// process and without calling a model, whether a chat request deserves the
// easy or the hard target of a tier alias, and applies the header overrides
// and the escalate-only session pin to that decision.
//
// It is pure logic: it imports config and wire only, never gin, redis,
// sessions or the gateway. Reading and writing the pin is the caller's job;
// Decide only says what to store. Classification is linear in the size of
// the request, scans strings without regular expressions and stops each
// scan as soon as its signal has fired.
package tier

import (
	"strings"
	"unicode/utf8"

	"switchyard/config"
	"switchyard/wire"
)

// Tier is a quality tier. The zero value is Easy, and Hard > Easy, so the
// escalate-only pin is max(pin, verdict).
type Tier uint8

// The two tiers of a tier route.
const (
	Easy Tier = iota
	Hard
)

// String returns "easy" or "hard", the spelling of headers, config and pins.
func (t Tier) String() string {
	if t == Hard {
		return "hard"
	}
	return "easy"
}

// ParseTier reads "easy" or "hard" (case-insensitive, surrounding spaces
// ignored). ok is false for anything else.
func ParseTier(s string) (t Tier, ok bool) {
	s = strings.TrimSpace(s)
	switch {
	case strings.EqualFold(s, "easy"):
		return Easy, true
	case strings.EqualFold(s, "hard"):
		return Hard, true
	}
	return Easy, false
}

// The Verdict sources reported in X-Switchyard-Tier-Source (SPEC 4).
const (
	SourceClassified = "classified" // the points table decided
	SourceReasoning  = "reasoning"  // explicit reasoning_effort or thinking went straight to hard
	SourcePinned     = "pinned"     // classified easy, held at hard by the session pin
	SourceForced     = "forced"     // X-Switchyard-Tier chose the tier
	SourceBypass     = "bypass"     // X-Switchyard-Smart-Routing: off used the route's default tier
)

// Signal is one reason that contributed to a verdict: a points-table row
// (named as its smart_routing.points key) or the explicit-reasoning rule.
type Signal struct {
	Name   string // points key, or "reasoning_effort" / "thinking"
	Points int    // points added to the score (0 for the reasoning rule)
	Detail string // what fired, e.g. "fenced block" or the matched word
}

// Verdict is the outcome of classification and overrides: what goes into
// the X-Switchyard-Tier* headers and the audit entry.
type Verdict struct {
	Tier    Tier
	Score   int      // sum of Points of Signals; 0 when the points table was not consulted
	Source  string   // one of the Source* constants
	Target  string   // the public model the alias is rewritten to; set by Decide
	Signals []Signal // every signal that fired, in table order; nil when none did
}

// Classifier scores chat requests with a points table. It is immutable
// after New and safe for concurrent use.
type Classifier struct {
	threshold int
	points    [numSignals]int // by signal index, from config with defaults filled in
}

// Signal indexes, in the order of the SPEC 4 table; names are the
// smart_routing.points keys.
const (
	sigCode = iota
	sigContext2k
	sigContext8k
	sigContext32k
	sigTools
	sigManyTools
	sigToolResults
	sigReasoningWords
	sigMath
	sigDeepConversation
	sigStructuredOutput
	sigLongOutput
	numSignals
)

var signalNames = [numSignals]string{
	"code", "context_2k", "context_8k", "context_32k", "tools", "many_tools",
	"tool_results", "reasoning_words", "math", "deep_conversation",
	"structured_output", "long_output",
}

// Thresholds of the table rows (SPEC 4).
const (
	context2k        = 2000
	context8k        = 8000
	context32k       = 32000
	manyTools        = 5
	deepConversation = 8
	longOutput       = 4096
	defaultThreshold = 4
)

// New builds a Classifier from the smart_routing section. Missing points
// keys take config.DefaultPoints; a threshold below 1 takes the default 4.
// A row with 0 points is switched off and never listed as a signal.
func New(cfg config.SmartRouting) *Classifier {
	c := &Classifier{threshold: cfg.Threshold}
	if c.threshold < 1 {
		c.threshold = defaultThreshold
	}
	def := config.DefaultPoints()
	for i, name := range signalNames {
		p, ok := cfg.Points[name]
		if !ok {
			p = def[name]
		}
		c.points[i] = max(p, 0)
	}
	return c
}

// Threshold is the score at which a request goes to the hard tier.
func (c *Classifier) Threshold() int { return c.threshold }

// Classify scores one parsed chat request (SPEC 4). Explicit reasoning
// (reasoning_effort or reasoning.effort of medium or higher, or an enabled
// Anthropic thinking block) returns Hard with Source "reasoning" without
// scoring. Otherwise it sums the points table and returns Source
// "classified". Target is left empty.
//
// The system prompt never scores: wire.Request.System and messages with the
// role system or developer are left out of every row, including the text
// length and the conversation depth, because agents resend a long
// boilerplate system prompt with every request and it says nothing about
// how hard this turn is. Tool results are messages like any other.
//
// Classify allocates only the Signals slice, and only when a signal fired.
func (c *Classifier) Classify(r *wire.Request) Verdict {
	if r == nil {
		return Verdict{Tier: Easy, Source: SourceClassified}
	}
	if isReasoningEffort(r.ReasoningEffort) {
		return Verdict{Tier: Hard, Source: SourceReasoning,
			Signals: []Signal{{Name: "reasoning_effort", Detail: strings.ToLower(r.ReasoningEffort)}}}
	}
	if r.Thinking {
		return Verdict{Tier: Hard, Source: SourceReasoning,
			Signals: []Signal{{Name: "thinking", Detail: "enabled"}}}
	}

	var fired [numSignals]bool
	var detail [numSignals]string
	set := func(i int, d string) {
		if c.points[i] > 0 {
			fired[i], detail[i] = true, d
		}
	}

	textLen, depth, toolResults := 0, 0, false
	for i := range r.Messages {
		m := &r.Messages[i]
		if isSystemRole(m.Role) {
			continue
		}
		depth++
		if textLen < context32k { // past the last row more counting decides nothing
			textLen += utf8.RuneCountInString(m.Text) // characters, not bytes (SPEC 4)
		}
		toolResults = toolResults || m.ToolResult
	}

	if c.points[sigCode] > 0 {
		for i := range r.Messages {
			m := &r.Messages[i]
			if isSystemRole(m.Role) {
				continue
			}
			if ok, d := findCode(m.Text); ok {
				set(sigCode, d)
				break
			}
		}
	}
	switch {
	case textLen >= context32k:
		set(sigContext32k, ">= 32000 chars")
	case textLen >= context8k:
		set(sigContext8k, ">= 8000 chars")
	case textLen >= context2k:
		set(sigContext2k, ">= 2000 chars")
	}
	switch {
	case r.Tools >= manyTools:
		set(sigManyTools, ">= 5 tools declared")
	case r.Tools >= 1:
		set(sigTools, "tools declared")
	}
	if toolResults {
		set(sigToolResults, "tool results in messages")
	}
	if c.points[sigReasoningWords] > 0 {
		if w := findReasoningWord(r.LastUserText()); w != "" {
			set(sigReasoningWords, w)
		}
	}
	if c.points[sigMath] > 0 {
		for i := range r.Messages {
			m := &r.Messages[i]
			if isSystemRole(m.Role) {
				continue
			}
			if d := findMath(m.Text); d != "" {
				set(sigMath, d)
				break
			}
		}
	}
	if depth >= deepConversation {
		set(sigDeepConversation, ">= 8 messages")
	}
	if r.JSONSchema {
		set(sigStructuredOutput, "response_format json_schema")
	}
	if r.MaxTokens >= longOutput {
		set(sigLongOutput, "max_tokens >= 4096")
	}

	n := 0
	for _, f := range fired {
		if f {
			n++
		}
	}
	v := Verdict{Tier: Easy, Source: SourceClassified}
	if n == 0 {
		return v
	}
	v.Signals = make([]Signal, 0, n)
	for i, f := range fired {
		if f {
			v.Signals = append(v.Signals, Signal{Name: signalNames[i], Points: c.points[i], Detail: detail[i]})
			v.Score += c.points[i]
		}
	}
	if v.Score >= c.threshold {
		v.Tier = Hard
	}
	return v
}

// isReasoningEffort reports an effort of medium or higher. "max" (the
// Anthropic effort scale's top) counts too; none, minimal and low do not.
func isReasoningEffort(e string) bool {
	e = strings.TrimSpace(e)
	for _, s := range [...]string{"medium", "high", "xhigh", "max"} {
		if strings.EqualFold(e, s) {
			return true
		}
	}
	return false
}

// isSystemRole reports the roles whose text is system prompt, which never
// scores.
func isSystemRole(role string) bool { return role == "system" || role == "developer" }

// Decide applies the header overrides and the escalate-only session pin of
// SPEC 4 to one request for route.
//
//   - forced "easy" or "hard" (X-Switchyard-Tier, case-insensitive) uses that
//     tier with Source "forced". It wins over smartOff because it names a
//     tier explicitly. Any other forced value is ignored.
//   - smartOff (X-Switchyard-Smart-Routing: off) uses route.DefaultTier
//     ("hard", otherwise easy) with Source "bypass".
//   - Otherwise classify is called (exactly once). If the session holds a
//     hard pin and the request classified easy, the verdict is Hard with
//     Source "pinned"; its Score and Signals stay those of the
//     classification.
//
// Overrides never touch the pin: storePin is false and newPin == pin, so a
// forced easy never lowers a hard pin and a forced hard never raises an
// easy one. A classified request always stores (and so refreshes the
// inactivity TTL of) newPin = max(pin, verdict); escalated reports a pin
// raised from easy to hard. havePin false means no pin exists (pin is then
// ignored). Target is set to route.Easy or route.Hard.
func Decide(route config.TierRoute, smartOff bool, forced string, classify func() Verdict, pin Tier, havePin bool) (v Verdict, newPin Tier, storePin bool, escalated bool) {
	if t, ok := ParseTier(forced); ok {
		v = Verdict{Tier: t, Source: SourceForced}
		return withTarget(v, route), pin, false, false
	}
	if smartOff {
		t, _ := ParseTier(route.DefaultTier)
		v = Verdict{Tier: t, Source: SourceBypass}
		return withTarget(v, route), pin, false, false
	}
	v = classify()
	if !havePin {
		return withTarget(v, route), v.Tier, true, false
	}
	if pin == Hard && v.Tier == Easy {
		v.Tier, v.Source = Hard, SourcePinned
	}
	newPin = max(pin, v.Tier)
	return withTarget(v, route), newPin, true, pin == Easy && newPin == Hard
}

func withTarget(v Verdict, route config.TierRoute) Verdict {
	v.Target = route.Easy
	if v.Tier == Hard {
		v.Target = route.Hard
	}
	return v
}
