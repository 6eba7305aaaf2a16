package catalog

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"switchyard/config"
)

// Error is an admin change the catalog refuses (SPEC 11). Status is 400
// (malformed), 404 (unknown id), 409 (conflicts with the lifecycle rules)
// or 422 (fails validation); Message names the field.
type Error struct {
	Status  int
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Message }

func errf(status int, field, format string, args ...any) *Error {
	return &Error{Status: status, Field: field, Message: fmt.Sprintf(format, args...)}
}

// The lifecycle operations below are pure: each takes the current State and
// returns the next one (a fresh copy) or an *Error, so a reader never sees
// half of a change. The caller persists and publishes the result.

// PutDeployment creates or replaces a deployment. providers maps provider
// names to kinds. Renaming (a new model on an existing id) is refused with
// 409 when it would remove the last deployment of a name a chain references.
func PutDeployment(cur *State, d config.Deployment, providers map[string]string) (*State, error) {
	config.ApplyDeploymentDefaults(&d)
	if !utf8.ValidString(d.ID) {
		// the id may come from the URL path, undecoded by JSON: stored as
		// JSON (U+FFFD for such bytes) it would be another id elsewhere
		return nil, errf(http.StatusUnprocessableEntity, "deployment.id", "deployment.id: %q is not UTF-8 text", d.ID)
	}
	if p := config.ValidateDeployment(d, "deployment", providers); len(p) > 0 {
		return nil, errf(http.StatusUnprocessableEntity, fieldOf(p[0]), "%s", strings.Join(p, "; "))
	}
	next := cur.Clone()
	i := next.indexOf(d.ID)
	if i < 0 {
		next.Deployments = append(next.Deployments, d)
		next.normalize()
		return next, nil
	}
	old := next.Deployments[i]
	if old.Model != d.Model && next.countModel(old.Model) == 1 && next.referenced(old.Model) {
		return nil, errf(http.StatusConflict, "model",
			"renaming deployment %q would remove the last deployment of %q, which fallback chains reference: reconfigure those chains first", d.ID, old.Model)
	}
	next.Deployments[i] = d
	next.pruneModels()
	return next, nil
}

// DeleteDeployment removes a deployment and applies the chain rules: chains
// stay while another deployment of the name remains; the last deployment of
// a primary takes its chains with it; the last deployment of a target
// removes the target from every chain, and a chain left empty is deleted.
// The last deployment of a model also takes the model's strategy with it;
// allowlists and tier routes naming it are kept (NewlyDangling reports them).
func DeleteDeployment(cur *State, id string) (*State, error) {
	next := cur.Clone()
	i := next.indexOf(id)
	if i < 0 {
		return nil, errf(http.StatusNotFound, "id", "no deployment with id %q", id)
	}
	model := next.Deployments[i].Model
	next.Deployments = slices.Delete(next.Deployments, i, i+1)
	if next.countModel(model) > 0 {
		return next, nil
	}
	next.pruneModels()
	kept := next.Fallbacks[:0]
	for _, c := range next.Fallbacks {
		if c.PrimaryModel == model {
			continue
		}
		c.FallbackModels = slices.DeleteFunc(c.FallbackModels, func(m string) bool { return m == model })
		if len(c.FallbackModels) == 0 {
			continue
		}
		kept = append(kept, c)
	}
	next.Fallbacks = kept
	return next, nil
}

// SetEnabled disables or enables a deployment; chains are kept either way.
func SetEnabled(cur *State, id string, on bool) (*State, error) {
	next := cur.Clone()
	i := next.indexOf(id)
	if i < 0 {
		return nil, errf(http.StatusNotFound, "id", "no deployment with id %q", id)
	}
	next.Deployments[i].Enabled = &on
	return next, nil
}

// PutFallback creates or replaces the chain (primaryModel, reason).
func PutFallback(cur *State, c Chain) (*State, error) {
	if c.Reason == "" {
		c.Reason = string(ReasonGeneral)
	}
	ops := cur.ModelOps()
	if p := config.ValidateFallback(c.PrimaryModel, c.Reason, c.FallbackModels, ops); len(p) > 0 {
		status := http.StatusUnprocessableEntity
		if c.PrimaryModel == "" || !config.IsReason(c.Reason) {
			status = http.StatusBadRequest
		}
		return nil, errf(status, apiField(fieldOf(p[0])), "%s", apiMessage(strings.Join(p, "; ")))
	}
	next := cur.Clone()
	c.FallbackModels = append([]string(nil), c.FallbackModels...)
	for i, f := range next.Fallbacks {
		if f.PrimaryModel == c.PrimaryModel && f.Reason == c.Reason {
			next.Fallbacks[i] = c
			return next, nil
		}
	}
	next.Fallbacks = append(next.Fallbacks, c)
	next.normalize()
	return next, nil
}

// DeleteFallback removes the chain (primary, reason).
func DeleteFallback(cur *State, primary, reason string) (*State, error) {
	if reason == "" {
		reason = string(ReasonGeneral)
	}
	if !config.IsReason(reason) {
		// a typo is a bad request, not an absent chain (SPEC 11: the
		// reason must be one of the three)
		return nil, errf(http.StatusBadRequest, "reason", "reason: %q is not one of %s", reason, strings.Join(config.Reasons, ", "))
	}
	next := cur.Clone()
	for i, f := range next.Fallbacks {
		if f.PrimaryModel == primary && f.Reason == reason {
			next.Fallbacks = slices.Delete(next.Fallbacks, i, i+1)
			return next, nil
		}
	}
	return nil, errf(http.StatusNotFound, "primaryModel", "no fallback chain for primaryModel %q and reason %q", primary, reason)
}

func (s *State) indexOf(id string) int {
	for i := range s.Deployments {
		if s.Deployments[i].ID == id {
			return i
		}
	}
	return -1
}

func (s *State) countModel(model string) int {
	n := 0
	for _, d := range s.Deployments {
		if d.Model == model {
			n++
		}
	}
	return n
}

// referenced reports whether any chain names model as primary or target.
func (s *State) referenced(model string) bool {
	for _, c := range s.Fallbacks {
		if c.PrimaryModel == model || slices.Contains(c.FallbackModels, model) {
			return true
		}
	}
	return false
}

// Consistent reports the first chain that points at a model with no
// deployment, or "" when every chain is sound; tests use it.
func (s *State) Consistent() string {
	ops := s.ModelOps()
	for _, c := range s.Fallbacks {
		if _, ok := ops[c.PrimaryModel]; !ok {
			return "chain primary " + c.PrimaryModel + " has no deployment"
		}
		for _, m := range c.FallbackModels {
			if _, ok := ops[m]; !ok {
				return "chain " + c.PrimaryModel + "/" + c.Reason + " targets " + m + " which has no deployment"
			}
		}
	}
	return ""
}

func fieldOf(problem string) string {
	if i := strings.IndexByte(problem, ':'); i > 0 {
		return problem[:i]
	}
	return ""
}

// apiField and apiMessage speak the admin API's field names (primaryModel,
// fallbackModels) instead of the YAML's (primary, models).
func apiField(f string) string {
	switch {
	case f == "primary":
		return "primaryModel"
	case strings.HasPrefix(f, "models"):
		return "fallbackModels" + strings.TrimPrefix(f, "models")
	}
	return f
}

func apiMessage(m string) string {
	parts := strings.Split(m, "; ")
	for i, p := range parts {
		if f := fieldOf(p); f != "" {
			parts[i] = apiField(f) + p[len(f):]
		}
	}
	return strings.Join(parts, "; ")
}
