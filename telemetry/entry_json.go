package telemetry

import (
	"math"
	"strconv"
	"time"

	"switchyard/redact"
	"switchyard/wire"
)

// AppendJSON appends e as the JSON object encoding/json makes of it (the
// same field names and omissions), without reflection: the writer encodes
// one entry per request for the audit stream, and json.Marshal was most of
// that cost. Readers decode it with encoding/json.
//
// The values a client chooses (its X-Request-Id, its end user id, the
// model it names) are masked where they are shaped like a credential
// (SPEC 15: audit entries), as the request log masks them; the entry keeps
// them as given, so a lookup by the id still finds it.
func (e *Entry) AppendJSON(b []byte) []byte {
	b = append(b, `{"request_id":`...)
	b = wire.AppendString(b, redact.Credentials(e.RequestID))
	b = append(b, `,"node":`...)
	b = wire.AppendString(b, e.Node)
	b = append(b, `,"time":`...)
	b = appendTime(b, e.Time)
	b = append(b, `,"team":`...)
	b = wire.AppendString(b, e.Team)
	b = appendOptString(b, `,"key":`, e.Key)
	b = appendOptString(b, `,"user":`, redact.Credentials(e.User))
	b = append(b, `,"operation":`...)
	b = wire.AppendString(b, e.Operation)
	b = append(b, `,"stream":`...)
	b = strconv.AppendBool(b, e.Stream)
	b = append(b, `,"requested_model":`...)
	b = wire.AppendString(b, redact.Credentials(e.RequestedModel))
	b = appendOptString(b, `,"routed_model":`, e.RoutedModel)
	b = appendOptString(b, `,"deployment":`, e.Deployment)
	if t := e.Tier; t != nil {
		b = append(b, `,"tier":{"alias":`...)
		b = wire.AppendString(b, t.Alias)
		b = append(b, `,"tier":`...)
		b = wire.AppendString(b, t.Tier)
		b = append(b, `,"score":`...)
		b = strconv.AppendInt(b, int64(t.Score), 10)
		b = append(b, `,"source":`...)
		b = wire.AppendString(b, t.Source)
		b = append(b, `,"target":`...)
		b = wire.AppendString(b, t.Target)
		if len(t.Signals) > 0 {
			b = append(b, `,"signals":[`...)
			for i, s := range t.Signals {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"name":`...)
				b = wire.AppendString(b, s.Name)
				b = append(b, `,"points":`...)
				b = strconv.AppendInt(b, int64(s.Points), 10)
				b = appendOptString(b, `,"detail":`, s.Detail)
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = appendOptString(b, `,"session_source":`, e.Session)
	if e.Attempts == nil {
		b = append(b, `,"attempts":null`...)
	} else {
		b = append(b, `,"attempts":[`...)
		for i := range e.Attempts {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.Attempts[i].appendJSON(b)
		}
		b = append(b, ']')
	}
	b = appendOptString(b, `,"fallback_reason":`, e.FallbackReason)
	b = append(b, `,"degraded":`...)
	b = strconv.AppendBool(b, e.Degraded)
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(e.PromptTokens), 10)
	if e.CachedTokens != 0 {
		b = append(b, `,"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(e.CachedTokens), 10)
	}
	if e.CacheWriteTokens != 0 {
		b = append(b, `,"cache_write_tokens":`...)
		b = strconv.AppendInt(b, int64(e.CacheWriteTokens), 10)
	}
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(e.CompletionTokens), 10)
	b = append(b, `,"cost_usd":`...)
	b = appendFloat(b, e.CostUSD)
	if e.Cached {
		b = append(b, `,"cached":true`...)
	}
	if e.SavedUSD != 0 {
		b = append(b, `,"saved_usd":`...)
		b = appendFloat(b, e.SavedUSD)
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = appendOptString(b, `,"error":`, e.Error)
	b = append(b, `,"duration_ms":`...)
	b = appendFloat(b, e.DurationMs)
	b = append(b, `,"overhead_ms":`...)
	b = appendFloat(b, e.OverheadMs)
	return append(b, '}')
}

func (a *Attempt) appendJSON(b []byte) []byte {
	b = append(b, `{"deployment":`...)
	b = wire.AppendString(b, a.Deployment)
	b = append(b, `,"model":`...)
	b = wire.AppendString(b, a.Model)
	b = append(b, `,"adapter":`...)
	b = wire.AppendString(b, a.Adapter)
	b = append(b, `,"transport":`...)
	b = wire.AppendString(b, a.Transport)
	b = append(b, `,"start":`...)
	b = appendTime(b, a.Start)
	b = append(b, `,"duration_ns":`...)
	b = strconv.AppendInt(b, int64(a.Duration), 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(a.Status), 10)
	b = append(b, `,"class":`...)
	b = wire.AppendString(b, a.Class)
	if a.Fallback {
		b = append(b, `,"fallback":true`...)
	}
	if a.LastResort {
		b = append(b, `,"last_resort":true`...)
	}
	if a.Probe {
		b = append(b, `,"probe":true`...)
	}
	b = appendOptString(b, `,"error":`, a.Error)
	return append(b, '}')
}

func appendOptString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return wire.AppendString(append(b, key...), s)
}

// appendTime is time.Time's MarshalJSON (RFC 3339 with nanoseconds); a
// year outside 0-9999, which MarshalJSON refuses, is written as the zero time.
func appendTime(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		t = time.Time{}
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendFloat writes f as encoding/json does; NaN and infinities, which it
// refuses, are written as 0.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		b = strconv.AppendFloat(b, f, 'e', -1, 64)
		// encoding/json's exponent has no leading zero: 1e-7, not 1e-07
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
		return b
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}
