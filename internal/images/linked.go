package images

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// LinkedFiles are the shared libraries a dynamically linked program on this
// machine loads, and its program interpreter (the dynamic loader), as image
// files at the paths the program looks for them: what an image needs beside
// a binary that is not static, such as Debian's Go programs, which Debian
// builds with cgo. It asks ldd, the loader's own resolver; a static binary
// has none ("not a dynamic executable"). Each Source is the path ldd
// printed, which may be a symbolic link: the image gets the file it points
// to, under the linked name.
func LinkedFiles(ctx context.Context, binary string) ([]File, error) {
	out, err := exec.CommandContext(ctx, "ldd", binary).CombinedOutput()
	text := string(out)
	if err != nil {
		if strings.Contains(text, "not a dynamic executable") {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %w: %s", binary, err, strings.TrimSpace(text))
	}
	return parseLdd(text)
}

// parseLdd reads ldd's lines: `name => /path (0x...)` for a library found,
// `/path (0x...)` for the interpreter, `linux-vdso.so.1 (0x...)` for the
// kernel's virtual library (nothing to copy). A library ldd could not find
// (`name => not found`) is an error: the image would not start.
func parseLdd(text string) ([]File, error) {
	var files []File
	seen := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var path string
		if name, target, ok := strings.Cut(line, "=>"); ok {
			target = strings.TrimSpace(target)
			if strings.HasPrefix(target, "not found") {
				return nil, fmt.Errorf("library %s not found on this machine", strings.TrimSpace(name))
			}
			path, _, _ = strings.Cut(target, " ")
		} else {
			path, _, _ = strings.Cut(line, " ")
		}
		if !filepath.IsAbs(path) || seen[path] {
			continue // linux-vdso.so.1, or a library twice
		}
		seen[path] = true
		files = append(files, File{Source: path, Path: path})
	}
	return files, nil
}
