// Package console is the operator console of SPEC 12.4: a static web page
// (hand-written HTML, CSS and JavaScript modules, embedded in the binary)
// that signs in with the admin key and reads and changes the cluster only
// through the admin API. It holds no data and no logic of its own on the
// server side: Handler serves the embedded files with a strict
// Content-Security-Policy, nothing else. It imports nothing of Switchyard;
// the gateway decides whether to mount it (only when the admin API is on).
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// Policy is the Content-Security-Policy of every console response: scripts,
// styles and connections only from the gateway's own origin, no inline
// script or style, no plugins, never framed, forms post nowhere else.
const Policy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Files returns the embedded console files, rooted at the console's top
// (index.html, style.css, js/...).
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embed pattern above guarantees the folder
	}
	return sub
}

// Handler serves the console. Mount it with the mount prefix stripped
// (http.StripPrefix("/ui", Handler())): "/" is index.html, other paths are
// files; a directory listing is never served.
func Handler() http.Handler {
	files := Files()
	fileServer := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", Policy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		// The files are small and change with the binary: revalidate each
		// time, so an upgraded gateway never runs an old script.
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := path.Clean("/" + r.URL.Path)
		if p != "/" {
			if st, err := fs.Stat(files, strings.TrimPrefix(p, "/")); err != nil || st.IsDir() {
				http.NotFound(w, r)
				return
			}
		}
		fileServer.ServeHTTP(w, r)
	})
}
