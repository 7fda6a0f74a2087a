package dash

import (
	"io/fs"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every asset is embedded and none refers to another origin: no CDN, no
// font or script from elsewhere. The only absolute URL allowed is the SVG
// namespace name, which browsers never fetch.
func TestAssets_EmbeddedAndSelfContained(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	n := 0
	err := fs.WalkDir(webFS, "web", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := webFS.ReadFile(path)
		require.NoError(t, err)
		for _, m := range external.FindAllString(string(b), -1) {
			assert.Equal(t, "http://www.w3.org", m, "%s refers to another origin", path)
		}
		n++
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 3, n, "index.html, app.js, style.css")

	ns := startNATS(t)
	s := startDash(t, Config{NATS: NATSConfig{URL: ns.ClientURL()}})
	for _, path := range []string{"", "app.js", "style.css"} {
		resp, err := http.Get(s.URL() + path)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'", path)
	}
	resp, err := http.Get(s.URL() + "nothing-here")
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}
