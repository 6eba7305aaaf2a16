package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"switchyard/config"
)

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// TestREADMEYAMLValidates loads every YAML block of README.md as
// `switchyard check` would, with each ${NAME} it references set: a
// configuration example an operator copies must validate as written.
func TestREADMEYAMLValidates(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := yamlBlock.FindAllStringSubmatchIndex(string(raw), -1)
	if len(blocks) == 0 {
		t.Fatal("README.md has no yaml blocks")
	}
	for _, b := range blocks {
		line := 1 + strings.Count(string(raw[:b[0]]), "\n")
		body := raw[b[2]:b[3]]
		if _, err := config.Load(body, dummyEnv(body)); err != nil {
			t.Errorf("README.md:%d: the yaml block does not validate:\n%v", line, err)
		}
	}
}
