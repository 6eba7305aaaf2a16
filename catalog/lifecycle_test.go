package catalog

import (
	"context"
	"net/http"
	"testing"

	"switchyard/config"
)

var provs = map[string]string{"sim": "simulated"}

func dep(id, model string, ops ...string) config.Deployment {
	return config.Deployment{ID: id, Model: model, Provider: "sim", Operations: ops}
}

func baseState() *State {
	st := &State{Version: 1, Deployments: []config.Deployment{
		dep("a1", "a", "chat"), dep("a2", "a", "chat"), dep("b1", "b", "chat"), dep("c1", "c", "chat"), dep("e1", "e", "embeddings"),
	}}
	st.Fallbacks = []Chain{
		{PrimaryModel: "a", Reason: "general", FallbackModels: []string{"b", "c"}},
		{PrimaryModel: "b", Reason: "general", FallbackModels: []string{"c"}},
		{PrimaryModel: "c", Reason: "context_window", FallbackModels: []string{"b"}},
	}
	st.normalize()
	return st
}

func wantStatus(t *testing.T, err error, status int) {
	t.Helper()
	ce, ok := err.(*Error)
	if !ok || ce.Status != status {
		t.Fatalf("want status %d, got %v", status, err)
	}
}

func TestFallbackValidation(t *testing.T) {
	cases := []struct {
		name   string
		chain  Chain
		status int
		field  string
	}{
		{"empty list", Chain{PrimaryModel: "a", FallbackModels: nil}, 422, "fallbackModels"},
		{"six models", Chain{PrimaryModel: "a", FallbackModels: []string{"b", "c", "d", "e", "f", "g"}}, 422, "fallbackModels"},
		{"duplicate", Chain{PrimaryModel: "a", FallbackModels: []string{"b", "b"}}, 422, "fallbackModels[1]"},
		{"primary itself", Chain{PrimaryModel: "a", FallbackModels: []string{"a"}}, 422, "fallbackModels[0]"},
		{"bad reason", Chain{PrimaryModel: "a", Reason: "timeout", FallbackModels: []string{"b"}}, 400, "reason"},
		{"unknown primary", Chain{PrimaryModel: "zz", FallbackModels: []string{"b"}}, 422, "primaryModel"},
		{"missing primary", Chain{FallbackModels: []string{"b"}}, 400, "primaryModel"},
		{"unknown target", Chain{PrimaryModel: "a", FallbackModels: []string{"zz"}}, 422, "fallbackModels[0]"},
		{"no shared operation", Chain{PrimaryModel: "a", FallbackModels: []string{"e"}}, 422, "fallbackModels[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PutFallback(baseState(), tc.chain)
			wantStatus(t, err, tc.status)
			if f := err.(*Error).Field; f != tc.field {
				t.Fatalf("field %q want %q (%v)", f, tc.field, err)
			}
		})
	}
	next, err := PutFallback(baseState(), Chain{PrimaryModel: "a", FallbackModels: []string{"c"}})
	if err != nil || len(next.Fallbacks) != 3 || next.Fallbacks[0].Reason != "general" || len(next.Fallbacks[0].FallbackModels) != 1 {
		t.Fatalf("replace with default reason: %v %+v", err, next)
	}
	// disabled deployments count for validation
	st, _ := SetEnabled(baseState(), "c1", false)
	if _, err := PutFallback(st, Chain{PrimaryModel: "b", Reason: "content_policy", FallbackModels: []string{"c"}}); err != nil {
		t.Fatalf("disabled target must count: %v", err)
	}
}

func TestLifecycleRules(t *testing.T) {
	t.Run("disable keeps chains", func(t *testing.T) {
		st, err := SetEnabled(baseState(), "b1", false)
		if err != nil || len(st.Fallbacks) != 3 || st.Deployments[2].IsEnabled() {
			t.Fatalf("%v %+v", err, st)
		}
	})
	t.Run("delete keeps chains while another deployment remains", func(t *testing.T) {
		st, err := DeleteDeployment(baseState(), "a1")
		if err != nil || len(st.Fallbacks) != 3 {
			t.Fatalf("%v %+v", err, st.Fallbacks)
		}
	})
	t.Run("last deployment of a primary deletes its chains", func(t *testing.T) {
		st, _ := DeleteDeployment(baseState(), "a1")
		st, err := DeleteDeployment(st, "a2")
		if err != nil || len(st.Fallbacks) != 2 || st.Fallbacks[0].PrimaryModel == "a" {
			t.Fatalf("%v %+v", err, st.Fallbacks)
		}
	})
	t.Run("last deployment of a target removes it and empty chains", func(t *testing.T) {
		st, err := DeleteDeployment(baseState(), "c1")
		if err != nil {
			t.Fatal(err)
		}
		// a: [b, c] -> [b]; b: [c] -> deleted; c's own chain deleted (primary)
		if len(st.Fallbacks) != 1 || st.Fallbacks[0].PrimaryModel != "a" || len(st.Fallbacks[0].FallbackModels) != 1 {
			t.Fatalf("%+v", st.Fallbacks)
		}
		if msg := st.Consistent(); msg != "" {
			t.Fatal(msg)
		}
	})
	t.Run("rename last deployment of referenced name is 409", func(t *testing.T) {
		_, err := PutDeployment(baseState(), dep("b1", "renamed", "chat"), provs)
		wantStatus(t, err, http.StatusConflict)
	})
	t.Run("rename with another deployment left is fine", func(t *testing.T) {
		st, err := PutDeployment(baseState(), dep("a1", "renamed", "chat"), provs)
		if err != nil || st.countModel("a") != 1 || st.countModel("renamed") != 1 {
			t.Fatalf("%v", err)
		}
	})
	t.Run("delete unknown is 404", func(t *testing.T) {
		_, err := DeleteDeployment(baseState(), "nope")
		wantStatus(t, err, http.StatusNotFound)
	})
	t.Run("invalid deployment is 422", func(t *testing.T) {
		_, err := PutDeployment(baseState(), config.Deployment{ID: "x", Model: "m", Provider: "ghost"}, provs)
		wantStatus(t, err, http.StatusUnprocessableEntity)
	})
	t.Run("mutations never change the input", func(t *testing.T) {
		base := baseState()
		_, _ = DeleteDeployment(base, "c1")
		if len(base.Fallbacks) != 3 || len(base.Fallbacks[0].FallbackModels) != 2 {
			t.Fatalf("input state was modified: %+v", base.Fallbacks)
		}
	})
}

func TestFileStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	fs, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, ok, err := fs.Load(ctx); ok || err != nil {
		t.Fatalf("empty store: %v %v", ok, err)
	}
	st := baseState()
	if err := fs.Save(ctx, 0, st); err != nil {
		t.Fatal(err)
	}
	next := st.Clone()
	next.Version = 2
	if err := fs.Save(ctx, 5, next); err != ErrConflict {
		t.Fatalf("stale base must conflict, got %v", err)
	}
	if err := fs.Save(ctx, 1, next); err != nil {
		t.Fatal(err)
	}
	fs2, _ := NewFileStore(dir)
	got, ok, err := fs2.Load(ctx)
	if err != nil || !ok || got.Version != 2 || len(got.Deployments) != 5 {
		t.Fatalf("reload: %v %v %+v", ok, err, got)
	}
}
